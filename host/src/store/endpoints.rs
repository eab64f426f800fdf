//! Endpoints: where executions are delivered, every version kept while the endpoint exists (a
//! job is delivered with the version it was created against), and the flow-control state all
//! workers share. The statements are in `sql/endpoints.sql`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::pages::{self, List};
use super::sql::references::{settle, IN_USE_SHOWN};
use super::sql::statements::endpoints as sql;
use super::sql::{query, Arg, InTx, Query, SqlBackend};
use super::{now, Backend, DbTime, Deleted, Endpoint, EndpointWrite, Inserted, PageRequest, StoreResult};

/// The endpoints' part of the store.
#[async_trait]
pub trait Endpoints: Send + Sync {
    async fn endpoint_insert(&self, endpoint: &EndpointWrite) -> StoreResult<Inserted<Endpoint>>;
    async fn endpoint_get(&self, name: &str) -> StoreResult<Option<Endpoint>>;
    /// The endpoints among `names` that exist, in no particular order: one query for the
    /// endpoint reads of many requests (`coalesce::EndpointReader`).
    async fn endpoint_get_many(&self, names: &[&str]) -> StoreResult<Vec<Endpoint>>;
    /// One version of an endpoint as it was written (kept while the endpoint exists).
    async fn endpoint_version_get(&self, name: &str, version: i32) -> StoreResult<Option<Endpoint>>;
    /// The endpoint a job's executions are delivered with: the version the job was created
    /// against, or the newest for rows older than endpoint versioning (no version recorded).
    async fn endpoint_for_job(&self, name: &str, version: Option<i32>) -> StoreResult<Option<Endpoint>> {
        match version {
            Some(version) => self.endpoint_version_get(name, version).await,
            None => self.endpoint_get(name).await,
        }
    }
    /// A tenant's endpoints, by creation.
    async fn endpoint_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Endpoint>>;
    /// How many endpoints a tenant has (its quota's count).
    async fn endpoint_count(&self, tenant: &str) -> StoreResult<i64>;
    /// The endpoints that set `max_concurrency`, with it (for the worker's shares).
    async fn endpoint_concurrency_limits(&self) -> StoreResult<Vec<(String, i32)>>;
    /// No execution of the endpoint is claimed before `until` (never shortened).
    async fn endpoint_pause(&self, name: &str, until: DateTime<Utc>) -> StoreResult<()>;
    /// Pause the endpoint (its owner's pause: nothing of it is claimed until it is resumed),
    /// keeping the first pause's time; None if it does not exist.
    async fn endpoint_hold(&self, name: &str) -> StoreResult<Option<Endpoint>>;
    /// Resume an endpoint its owner paused; None if it does not exist.
    async fn endpoint_release(&self, name: &str) -> StoreResult<Option<Endpoint>>;
    /// Enable a disabled endpoint and close its circuit (forgetting its failures and any 429
    /// pause); None if it does not exist.
    async fn endpoint_enable(&self, name: &str) -> StoreResult<Option<Endpoint>>;
    /// Endpoints disabled (by `auto_disable_after`) whose `on_failure` endpoint has not been
    /// told yet, the earliest disabled first.
    async fn endpoints_disabled_unannounced(&self, limit: i64) -> StoreResult<Vec<Endpoint>>;
    /// Record that the disabling of `name` at `disabled_at` was announced.
    async fn endpoint_disabled_announced(&self, name: &str, disabled_at: DateTime<Utc>) -> StoreResult<()>;
    /// Endpoints whose circuit is open or half-open, or that are disabled (for `/metrics`).
    async fn endpoint_circuits_not_closed(&self) -> StoreResult<Vec<Endpoint>>;
    /// Replaces the endpoint and bumps its version; None if it does not exist.
    async fn endpoint_update(&self, endpoint: &EndpointWrite) -> StoreResult<Option<Endpoint>>;
    /// Refused (InUse, with job ids) while a job still has deliveries to make through it (an
    /// active cron job, or a job with an unfinished execution); otherwise the endpoint goes with
    /// its finished jobs and their history (purge most of it first with
    /// `Executions::execution_delete_finished`, in small batches).
    async fn endpoint_delete(&self, name: &str) -> StoreResult<Deleted>;
}

/// An endpoint row's columns, for the statements put together per call (a list, a read of many).
pub(super) const COLUMNS: &str = "name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, \
     updated_at, plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst, \
     circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms, circuit_last_error, \
     disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version, classifier_config, \
     concurrency";

/// An insert's or update's values, `$2`…`$20` after the name (`$7` the time).
fn written(statement: super::sql::Statement, endpoint: &EndpointWrite) -> Query<'static> {
    query(statement)
        .bind(&endpoint.name)
        .bind(endpoint.endpoint_type)
        .bind(&endpoint.payload_spec)
        .bind(&endpoint.config)
        .bind(Arg::json(&endpoint.spec))
        .bind(Arg::json(&endpoint.retry_policy))
        .bind(DbTime(now()))
        .bind(&endpoint.plugin)
        .bind(&endpoint.renderer)
        .bind(endpoint.max_concurrency)
        .bind(&endpoint.on_failure)
        .bind(endpoint.rate_limit.map(|r| r.per_second))
        .bind(endpoint.rate_limit.map(|r| i32::try_from(r.burst).unwrap_or(i32::MAX)))
        .bind(Arg::json_of(endpoint.circuit_policy.as_ref()))
        .bind(endpoint.timeout_ms)
        .bind(endpoint.plugin_version)
        .bind(endpoint.classifier.as_ref().map(|c| c.name.as_str()))
        .bind(endpoint.classifier.as_ref().and_then(|c| c.version))
        .bind(Arg::json_of(endpoint.classifier_config.as_ref()))
        .bind(Arg::json_of(endpoint.concurrency.as_ref()))
}

/// What follows a write of the endpoint in its transaction: its version kept as written, and
/// the secrets its templates name (so a secret in use cannot be deleted).
async fn after_write(tx: &mut impl InTx, endpoint: &EndpointWrite) -> StoreResult<()> {
    query(sql::ENDPOINT_VERSION_SNAPSHOT).bind(&endpoint.name).execute(tx.on()).await?;
    query(sql::ENDPOINT_SECRET_REFS_DELETE).bind(&endpoint.name).execute(tx.on()).await?;
    for secret in &endpoint.secret_refs {
        query(sql::ENDPOINT_SECRET_REF_INSERT).bind(&endpoint.name).bind(secret).execute(tx.on()).await?;
    }
    Ok(())
}

/// Which executions [`delete_executions_of`] deletes.
#[derive(Debug, Clone, Copy)]
pub(super) enum ExecutionsOf {
    Job,
    Endpoint,
}

/// Delete the executions of the job or endpoint `value`, with their logs and attempts.
pub(super) async fn delete_executions_of(tx: &mut impl InTx, of: ExecutionsOf, value: &str) -> StoreResult<()> {
    let column = match of {
        ExecutionsOf::Job => "job_id",
        ExecutionsOf::Endpoint => "endpoint",
    };
    // Never a RUNNING one (the callers found none; one claimed since stays, and its job's
    // foreign key refuses the delete that follows). Said in the query, so PostgreSQL reads
    // idx_executions_settled_by_job (`settled_or_running`).
    let matching = format!("{column} = $1 AND status <> 'RUNNING'");
    let of = format!("SELECT execution_id FROM executions WHERE {matching}");
    for sql in [
        format!("DELETE FROM execution_logs WHERE execution_id IN ({of})"),
        format!("DELETE FROM attempts WHERE execution_id IN ({of})"),
        format!("DELETE FROM executions WHERE {matching}"),
    ] {
        query(&sql).bind(value).execute(tx.on()).await?;
    }
    Ok(())
}

#[async_trait]
impl<S: SqlBackend> Endpoints for S {
    async fn endpoint_insert(&self, endpoint: &EndpointWrite) -> StoreResult<Inserted<Endpoint>> {
        let mut tx = self.write().await?;
        let created: Option<Endpoint> = written(sql::ENDPOINT_INSERT, endpoint).fetch_optional(&mut tx).await?;
        let Some(created) = created else {
            drop(tx);
            return Inserted::existing(self.endpoint_get(&endpoint.name).await?);
        };
        after_write(&mut tx, endpoint).await?;
        tx.commit().await?;
        Ok(Inserted::Created(created))
    }

    async fn endpoint_get(&self, name: &str) -> StoreResult<Option<Endpoint>> {
        query(sql::ENDPOINT_GET).bind(name).fetch_optional(self.db()).await
    }

    async fn endpoint_get_many(&self, names: &[&str]) -> StoreResult<Vec<Endpoint>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // `IN ($1, …, $n)`: both backends read it, and the few distinct names a batch holds
        // keep the prepared statements few.
        let places: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
        let text = format!("SELECT {COLUMNS} FROM endpoints WHERE name IN ({})", places.join(", "));
        let mut many = query(&text);
        for name in names {
            many = many.bind(*name);
        }
        many.fetch_all(self.db()).await
    }

    async fn endpoint_version_get(&self, name: &str, version: i32) -> StoreResult<Option<Endpoint>> {
        query(sql::ENDPOINT_VERSION_GET).bind(name).bind(version).fetch_optional(self.db()).await
    }

    async fn endpoint_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Endpoint>> {
        let list = List {
            columns: COLUMNS,
            from: "endpoints",
            time_column: "created_at",
            key: "name",
            written: None,
            // `tenant` is computed from the name (`domain::tenant`).
            filters: &[("tenant", tenant)],
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn endpoint_count(&self, tenant: &str) -> StoreResult<i64> {
        // By idx_endpoints_tenant (`tenant` is computed from the name).
        let (count,): (i64,) = query("SELECT CAST(COUNT(*) AS BIGINT) FROM endpoints WHERE tenant = $1")
            .bind(tenant)
            .fetch_one(self.db())
            .await?;
        Ok(count)
    }

    async fn endpoint_concurrency_limits(&self) -> StoreResult<Vec<(String, i32)>> {
        query(sql::ENDPOINT_CONCURRENCY_LIMITS).fetch_all(self.db()).await
    }

    async fn endpoint_pause(&self, name: &str, until: DateTime<Utc>) -> StoreResult<()> {
        query(sql::ENDPOINT_PAUSE).bind(name).bind(DbTime(until)).execute(self.db()).await?;
        Ok(())
    }

    async fn endpoint_hold(&self, name: &str) -> StoreResult<Option<Endpoint>> {
        query(sql::ENDPOINT_HOLD).bind(name).bind(DbTime(now())).fetch_optional(self.db()).await
    }

    async fn endpoint_release(&self, name: &str) -> StoreResult<Option<Endpoint>> {
        query(sql::ENDPOINT_RELEASE).bind(name).fetch_optional(self.db()).await
    }

    async fn endpoint_enable(&self, name: &str) -> StoreResult<Option<Endpoint>> {
        query(sql::ENDPOINT_ENABLE).bind(name).fetch_optional(self.db()).await
    }

    async fn endpoints_disabled_unannounced(&self, limit: i64) -> StoreResult<Vec<Endpoint>> {
        query(sql::ENDPOINTS_DISABLED_UNANNOUNCED).bind(limit).fetch_all(self.db()).await
    }

    async fn endpoint_disabled_announced(&self, name: &str, disabled_at: DateTime<Utc>) -> StoreResult<()> {
        query(sql::ENDPOINT_DISABLED_ANNOUNCED)
            .bind(name)
            .bind(DbTime(disabled_at))
            .bind(DbTime(now()))
            .execute(self.db())
            .await?;
        Ok(())
    }

    async fn endpoint_circuits_not_closed(&self) -> StoreResult<Vec<Endpoint>> {
        query(sql::ENDPOINT_CIRCUITS_NOT_CLOSED).fetch_all(self.db()).await
    }

    async fn endpoint_update(&self, endpoint: &EndpointWrite) -> StoreResult<Option<Endpoint>> {
        let mut tx = self.write().await?;
        let updated: Option<Endpoint> = written(sql::ENDPOINT_UPDATE, endpoint).fetch_optional(&mut tx).await?;
        let Some(updated) = updated else { return Ok(None) };
        after_write(&mut tx, endpoint).await?;
        tx.commit().await?;
        Ok(Some(updated))
    }

    async fn endpoint_delete(&self, name: &str) -> StoreResult<Deleted> {
        // Blocked by the jobs still to deliver through it (an active cron job, a job with an
        // unfinished execution). Its finished jobs' executions were purged beforehand in small
        // batches (`execution_delete_finished`); the jobs go with the endpoint. An execution
        // finished since is purged here.
        //
        // The endpoint and its jobs are locked first: a create for it (which holds the endpoint
        // shared), a cron tick of one of its jobs (which updates the job) or a retry (which
        // holds the job shared) either went before, and the checks below see what it wrote, or
        // waits and then finds them gone.
        let mut tx = self.write().await?;
        let held: Option<(String,)> = query(sql::ENDPOINT_HELD_FOR_DELETE).bind(name).fetch_optional(&mut tx).await?;
        if held.is_none() {
            return Ok(Deleted::NotFound);
        }
        // SQLite takes no row locks (its write transaction holds the one write lock), where this
        // would only read every id.
        if tx.backend() == Backend::Postgres {
            query(sql::ENDPOINT_JOBS_HELD_FOR_DELETE).bind(name).execute(&mut tx).await?;
        }
        let blocking: Vec<(String,)> =
            query(sql::ENDPOINT_JOBS_ACTIVE).bind(name).bind(IN_USE_SHOWN).fetch_all(&mut tx).await?;
        if !blocking.is_empty() {
            return Ok(Deleted::InUse(blocking.into_iter().map(|(j,)| j).collect()));
        }
        let callers: Vec<(String,)> =
            query(sql::ENDPOINT_FAILURE_CALLERS).bind(name).bind(IN_USE_SHOWN).fetch_all(&mut tx).await?;
        if !callers.is_empty() {
            return Ok(Deleted::InUse(callers.into_iter().map(|(e,)| format!("endpoint {e} (on_failure)")).collect()));
        }
        let result = async {
            delete_executions_of(&mut tx, ExecutionsOf::Endpoint, name).await?;
            query(sql::ENDPOINT_JOBS_DELETE).bind(name).execute(&mut tx).await?;
            query(sql::ENDPOINT_DELETE).bind(name).execute(&mut tx).await
        }
        .await;
        settle(tx, result).await
    }
}
