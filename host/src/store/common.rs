//! The queries PostgreSQL and SQLite both accept, written once.
//!
//! `impl_store!(Type, Database, { backend's own methods })` expands into the backend's whole
//! `Store` impl: its own methods plus every method below. Each backend type must have a `pool`
//! field, an inherent `begin_write()` that opens a transaction that will write (SQLite needs
//! `BEGIN IMMEDIATE` there; a deferred read-then-write transaction can fail under WAL instead of
//! waiting for the lock), an inherent `begin_bookkeeping()` for the worker's attempt results
//! (PostgreSQL may commit those without waiting for the flush), an inherent `finish_fenced()`
//! writing a batch of attempt outcomes to their executions under the fence, an inherent
//! `record_attempts()` inserting the attempts and log lines of the outcomes that won, an
//! inherent `write_jobs()` writing and committing a batch of new jobs and their executions, and an
//! inherent `advance_ticks()` recording a batch of cron ticks (compare-and-set, then the
//! winners' executions), and three inherent constants, `LOCK_SHARED`, `LOCK_EXCLUSIVE` and
//! `LOCK_EXCLUSIVE_SKIP_LOCKED`, the row-locking clause a SELECT ends with to hold a row as a
//! foreign key to it would (`FOR KEY SHARE`) and to hold it for its delete (`FOR UPDATE`, and
//! the same passing over rows another transaction holds): PostgreSQL keeps no foreign keys from
//! jobs to endpoints or from executions to jobs (migration 0066), so the store takes those locks
//! itself; SQLite keeps its foreign keys, and its write transactions run one at a time, so its
//! clauses are empty.
//!
//! All SQL here sticks to the portable subset: `$N` placeholders (sqlx's SQLite driver reads
//! them as positions), `ON CONFLICT … DO NOTHING`, `RETURNING`, and row-value comparison.
//!
//! The macro is what is left of writing these queries once. Its replacement is `store::sql`:
//! statements in `.sql` files and methods written once as plain Rust over `sql::query`, which
//! binds and runs the same values on either backend (the aggregates already moved: access,
//! documents, endpoints, history, plugins, regions). Each backend also implements
//! `sql::SqlBackend`, which the methods below use where they share that code (a list's page, a
//! delete of executions). The macro's price stays until the rest moves: rustfmt cannot format
//! the body and compiler errors point into the expansion; `store::conformance` runs the same
//! behaviour on both backends as the net.

macro_rules! impl_store {
    ($store:ty, $db:ty, { $($own:tt)* }) => {
        // An anonymous scope so the imports below serve the expansion without leaking into
        // (or depending on) the backend module that invokes the macro.
        const _: () = {
            use sqlx::types::Json;
            use chrono::{DateTime, Utc};
            use $crate::store::engine::{
                settled_or_running, EXECUTION_COLUMNS, JOB_COLUMNS, JOB_WRITE_COLUMNS,
            };
            use $crate::store::{
                now, AttemptFinish, CronAdvance, DbTime, Deleted, Endpoint, Execution,
                ExecutionWrite, Inserted, Job, JobFilter, JobStats, JobWrite, PageRequest,
                StoreError, StoreResult,
            };

            const ENDPOINT_COLUMNS: &str =
                "name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at, plugin, renderer, \
                 max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst, circuit_policy, circuit_failures, \
                 circuit_failing_since, circuit_open_until, circuit_cooldown_ms, circuit_last_error, disabled_at, timeout_ms, plugin_version, \
                 classifier, classifier_version, classifier_config";
            use $crate::store::sql::references::IN_USE_SHOWN;

            impl $store {
                /// [`Store::job_pause`], once: see `store::retrying_moved`.
                async fn job_pause_once(&self, job_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
                    let mut tx = self.begin_write().await?;
                    let done = sqlx::query(
                        "UPDATE jobs SET paused_at = $2, cron_next_run_at = NULL
                         WHERE job_id = $1 AND status = 'ACTIVE' AND trigger_type = 'CRON' AND paused_at IS NULL",
                    )
                    .bind(job_id)
                    .bind(DbTime(at))
                    .execute(&mut *tx)
                    .await?;
                    // A tick made ahead, or held by `buffer_one`, is not delivered while paused:
                    // it is removed (it never ran), so a resume that catches up makes it again.
                    if done.rows_affected() == 1 {
                        // (A tick promoted ahead of its time is QUEUED, not yet due.)
                        sqlx::query(
                            "DELETE FROM executions WHERE job_id = $1 AND attempt_count = 0
                               AND (status = 'PENDING' OR (status = 'QUEUED' AND run_at > $2))",
                        )
                        .bind(job_id)
                        .bind(DbTime(at))
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(done.rows_affected() == 1)
                }

                /// [`Store::job_cancel_waiting`], once: see `store::retrying_moved`.
                async fn job_cancel_waiting_once(&self, job_id: &str) -> StoreResult<Vec<String>> {
                    let at = DbTime(now());
                    let mut tx = self.begin_write().await?;
                    let cancelled: Vec<(String,)> = sqlx::query_as(
                        "UPDATE executions SET status = 'CANCELLED', completed_at = $2, worker_id = NULL
                         WHERE job_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING')
                         RETURNING execution_id",
                    )
                    .bind(job_id)
                    .bind(at)
                    .fetch_all(&mut *tx)
                    .await?;
                    if !cancelled.is_empty() {
                        sqlx::query("UPDATE jobs SET status = 'RETIRED', retired_at = $2 WHERE job_id = $1 AND status = 'ACTIVE'")
                            .bind(job_id)
                            .bind(at)
                            .execute(&mut *tx)
                            .await?;
                    }
                    tx.commit().await?;
                    Ok(cancelled.into_iter().map(|(id,)| id).collect())
                }

                /// [`Store::execution_cancel`], once: see `store::retrying_moved`.
                async fn execution_cancel_once(&self, execution_id: &str) -> StoreResult<bool> {
                    // Compare-and-set against the claim: whichever commits first wins.
                    let done = sqlx::query(
                        "UPDATE executions SET status = 'CANCELLED', completed_at = $2, worker_id = NULL
                         WHERE execution_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING')",
                    )
                    .bind(execution_id)
                    .bind(DbTime(now()))
                    .execute(&self.pool)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                /// [`Store::execution_promote_due`], once: see `store::retrying_moved`.
                async fn execution_promote_due_once(&self, now: DateTime<Utc>, ahead: chrono::Duration) -> StoreResult<Vec<DateTime<Utc>>> {
                    // Ticks of jobs with an overlap policy (every other execution has none) go
                    // through the policy first, in the same transaction: while an earlier
                    // execution of the job is unfinished, a `skip` tick is skipped, and a
                    // `buffer_one` tick waits unless an older one already waits, when it is
                    // skipped. Only the oldest due tick of such a job is released at once.
                    let mut tx = self.begin_write().await?;
                    let busy = "(EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id
                                      AND p.status IN ('QUEUED', 'RETRYING'))
                                 OR EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id
                                      AND p.status = 'RUNNING'))";
                    let older_waiting = "EXISTS (SELECT 1 FROM executions b WHERE b.job_id = executions.job_id
                                     AND b.status = 'PENDING' AND b.overlap_policy IS NOT NULL
                                     AND (b.run_at, b.execution_id) < (executions.run_at, executions.execution_id))";
                    let skipped = sqlx::query(&format!(
                        "UPDATE executions SET status = 'CANCELLED', completed_at = $1, output = $2
                         WHERE status = 'PENDING' AND run_at <= $1 AND overlap_policy IS NOT NULL AND {busy}
                           AND (overlap_policy = 'skip' OR {older_waiting})"
                    ))
                    .bind(DbTime(now))
                    .bind(Json(serde_json::json!({
                        "skipped": "overlap_policy: an earlier execution of the job was still unfinished at this tick"
                    })))
                    .execute(&mut *tx)
                    .await?;
                    if skipped.rows_affected() > 0 {
                        tracing::debug!(skipped = skipped.rows_affected(), "Skipped cron ticks by overlap policy.");
                    }
                    // An overlap policy is judged at the tick's time; anything else may go
                    // ahead of it (`$2`).
                    let promoted: Vec<(DateTime<Utc>,)> = sqlx::query_as(&format!(
                        "UPDATE executions SET status = 'QUEUED'
                         WHERE status = 'PENDING' AND run_at <= $2
                           AND (overlap_policy IS NULL OR (run_at <= $1 AND NOT ({busy} OR {older_waiting})))
                         RETURNING run_at"
                    ))
                    .bind(DbTime(now))
                    .bind(DbTime(now + ahead))
                    .fetch_all(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(promoted.into_iter().map(|(at,)| at).collect())
                }

                /// [`Store::execution_reclaim_expired`], once: see `store::retrying_moved`.
                async fn execution_reclaim_expired_once(&self, now: DateTime<Utc>) -> StoreResult<u64> {
                    let mut tx = self.begin_write().await?;
                    // The row lock this takes also fences the lost worker: its finishing write
                    // waits for this one and then finds the execution no longer RUNNING. A row
                    // some statement holds locked this instant (a live worker renewing or
                    // finishing it) is passed over (`SKIP_LOCKED`) rather than waited on in an
                    // order that could deadlock, and looked at again next round. Each backend
                    // names its clock (`DB_NOW`): PostgreSQL's own, so every process compares
                    // leases against one clock.
                    let sql = format!(
                        "UPDATE executions
                         SET status = CASE WHEN attempt_count >= max_attempts THEN 'FAILED' ELSE 'RETRYING' END,
                             completed_at = CASE WHEN attempt_count >= max_attempts THEN $1 ELSE NULL END,
                             worker_id = NULL,
                             lease_expires_at = NULL,
                             run_at = $1
                         WHERE execution_id IN (SELECT execution_id FROM executions
                                                WHERE status = 'RUNNING' AND lease_expires_at < {now}
                                                ORDER BY execution_id{skip_locked})
                           AND status = 'RUNNING'
                         RETURNING execution_id, attempt_count, started_at",
                        now = Self::DB_NOW,
                        skip_locked = Self::SKIP_LOCKED,
                    );
                    let reclaimed: Vec<(String, i32, Option<DateTime<Utc>>)> = sqlx::query_as(&sql)
                        .bind(DbTime(now))
                        .fetch_all(&mut *tx)
                        .await?;
                    let error = serde_json::json!({
                        "type": $crate::domain::AttemptErrorType::WorkerLost,
                        "message": "The worker holding this attempt stopped renewing its lease (it was stopped, or lost the database); the execution was reclaimed.",
                        "retryable": true,
                    });
                    for (execution_id, attempt, started_at) in &reclaimed {
                        // (execution, attempt number) is unique only within a partition where
                        // attempts are partitioned by time: asked first.
                        sqlx::query(
                            "INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at, error, created_at)
                             SELECT $1, $2, $3, 'FAILED', $4, $5, $6, $5
                             WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.execution_id = $2 AND a.attempt_number = $3)
                             ON CONFLICT DO NOTHING",
                        )
                        .bind($crate::ids::AttemptId::new())
                        .bind(execution_id)
                        .bind(attempt)
                        .bind(DbTime(started_at.unwrap_or(now)))
                        .bind(DbTime(now))
                        .bind(Json(&error))
                        .execute(&mut *tx)
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(reclaimed.len() as u64)
                }

                /// One page of `table` (`sql::pages`) among the rows that also meet `written`, a
                /// condition written into the statement: a partial index whose predicate it is can
                /// then serve the page, which a bound value never lets a generic plan prove.
                #[allow(clippy::too_many_arguments)]
                async fn list_page_where<T>(
                    &self,
                    columns: &str,
                    table: &str,
                    time_column: &str,
                    key: &str,
                    written: Option<&str>,
                    filters: &[(&str, &str)],
                    page: &PageRequest,
                ) -> StoreResult<Vec<T>>
                where
                    T: $crate::store::sql::Row,
                {
                    let list = $crate::store::sql::pages::List { columns, from: table, time_column, key, written, filters };
                    $crate::store::sql::pages::page(<Self as $crate::store::sql::SqlBackend>::db(self), &list, page).await
                }

                /// Whether the endpoint exists, held by `lock` until the transaction ends
                /// (`LOCK_SHARED`: not deleted under the jobs about to be written for it).
                async fn endpoint_held(tx: &mut sqlx::Transaction<'_, $db>, name: &str, lock: &str) -> StoreResult<bool> {
                    let sql = format!("SELECT name FROM endpoints WHERE name = $1{lock}");
                    let held: Option<(String,)> = sqlx::query_as(&sql).bind(name).fetch_optional(&mut **tx).await?;
                    Ok(held.is_some())
                }

                /// Whether the job exists, held by `lock` until the transaction ends.
                async fn job_held(tx: &mut sqlx::Transaction<'_, $db>, job_id: &str, lock: &str) -> StoreResult<bool> {
                    let sql = format!("SELECT job_id FROM jobs WHERE job_id = $1{lock}");
                    let held: Option<(String,)> = sqlx::query_as(&sql).bind(job_id).fetch_optional(&mut **tx).await?;
                    Ok(held.is_some())
                }

                /// Take from each rate-limited endpoint's bucket (`tokens` as of `now`) what this
                /// claim took of it.
                async fn spend_tokens(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    buckets: &[(String, f64)],
                    claimed: &[Execution],
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    for (name, tokens) in buckets {
                        let taken = claimed.iter().filter(|e| e.endpoint == *name).count();
                        if taken > 0 {
                            sqlx::query("UPDATE endpoints SET rate_tokens = $2, rate_tokens_at = $3 WHERE name = $1")
                                .bind(name)
                                .bind(tokens - taken as f64)
                                .bind(DbTime(now))
                                .execute(&mut **tx)
                                .await?;
                        }
                    }
                    Ok(())
                }

                /// Tell the circuit breakers of the winners' endpoints what their outcomes say
                /// about the receivers (`flow::circuit`), in the finishing transaction. Rows are
                /// read (and on PostgreSQL locked, in name order like the claims) only for an
                /// endpoint with a failure in the batch or a breaker that is not closed, so a
                /// batch of healthy deliveries costs one indexed read. The breakers' transitions are
                /// returned, for the caller to record once the transaction has committed.
                async fn circuit_record(tx: &mut sqlx::Transaction<'_, $db>, winners: &[&AttemptFinish]) -> StoreResult<Vec<$crate::store::CircuitChange>> {
                    let mut changes = Vec::new();
                    let mut names: Vec<&str> = winners.iter().filter(|f| f.health.is_some()).map(|f| f.endpoint.as_str()).collect();
                    if names.is_empty() {
                        return Ok(changes);
                    }
                    names.sort_unstable();
                    names.dedup();
                    let failing: Vec<&str> = names
                        .iter()
                        .copied()
                        .filter(|n| winners.iter().any(|f| f.endpoint == *n && f.health.as_ref().is_some_and($crate::flow::Health::is_failure)))
                        .collect();
                    // The names travel as one JSON array: both databases read it as rows.
                    let sql = format!(
                        "SELECT {ENDPOINT_COLUMNS} FROM endpoints
                         WHERE name IN ({list})
                           AND (circuit_failures > 0 OR circuit_open_until IS NOT NULL OR name IN ({failing}))
                         ORDER BY name{lock}",
                        list = Self::JSON_TEXT_LIST.replace("$N", "$1"),
                        failing = Self::JSON_TEXT_LIST.replace("$N", "$2"),
                        lock = Self::ROW_LOCK,
                    );
                    let rows = sqlx::query_as::<$db, Endpoint>(&sql)
                        .bind(serde_json::to_string(&names).expect("names serialize"))
                        .bind(serde_json::to_string(&failing).expect("names serialize"))
                        .fetch_all(&mut **tx)
                        .await?;
                    let at = now();
                    for endpoint in rows {
                        let policy = endpoint.circuit_policy();
                        let mut state = endpoint.circuit();
                        let before = state.clone();
                        for health in winners.iter().filter(|f| f.endpoint == endpoint.name).filter_map(|f| f.health.as_ref()) {
                            for transition in state.record(&policy, health, at) {
                                changes.push($crate::store::CircuitChange { endpoint: endpoint.name.clone(), transition, failures: state.failures });
                            }
                        }
                        if state == before {
                            continue;
                        }
                        sqlx::query(
                            "UPDATE endpoints
                             SET circuit_failures = $2, circuit_failing_since = $3, circuit_open_until = $4,
                                 circuit_cooldown_ms = $5, circuit_last_error = $6, disabled_at = $7
                             WHERE name = $1",
                        )
                        .bind(&endpoint.name)
                        .bind(state.failures)
                        .bind(state.failing_since.map(DbTime))
                        .bind(state.open_until.map(DbTime))
                        .bind(state.cooldown_ms)
                        .bind(&state.last_error)
                        .bind(state.disabled_at.map(DbTime))
                        .execute(&mut **tx)
                        .await?;
                    }
                    Ok(changes)
                }

                /// A retired cron job stops firing: the tick materialized ahead of its time (still
                /// PENDING) is cancelled. Ticks already due run to completion, as docs/api.md says.
                async fn cancel_ticks_ahead(tx: &mut sqlx::Transaction<'_, $db>, job_id: &str, at: DateTime<Utc>) -> StoreResult<()> {
                    sqlx::query(
                        "UPDATE executions SET status = 'CANCELLED', completed_at = $2
                         WHERE job_id = $1 AND (status = 'PENDING' OR (status = 'QUEUED' AND run_at > $2))",
                    )
                    .bind(job_id)
                    .bind(DbTime(at))
                    .execute(&mut **tx)
                    .await?;
                    Ok(())
                }

                async fn job_insert_row(tx: &mut sqlx::Transaction<'_, $db>, job: &JobWrite) -> StoreResult<Option<Job>> {
                    let sql = format!(
                        "INSERT INTO jobs ({JOB_WRITE_COLUMNS})
                         VALUES ($1, $2, $3, $4, 'ACTIVE', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                             $19, $20, $21, $22, $23, $24, $25, $26)
                         ON CONFLICT (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
                         RETURNING {JOB_COLUMNS}"
                    );
                    Ok(sqlx::query_as::<$db, Job>(&sql)
                        .bind(&job.job_id)
                        .bind(&job.endpoint)
                        .bind(&job.endpoint_type)
                        .bind(&job.trigger_type)
                        .bind(job.version)
                        .bind(&job.previous_version_id)
                        .bind(&job.idempotency_key)
                        .bind(Json(&job.input))
                        .bind(job.run_at.map(DbTime))
                        .bind(&job.cron_expression)
                        .bind(&job.cron_timezone)
                        .bind(job.cron_starts_at.map(DbTime))
                        .bind(job.cron_ends_at.map(DbTime))
                        .bind(job.cron_next_run_at.map(DbTime))
                        .bind(DbTime(job.created_at))
                        .bind(job.endpoint_version)
                        .bind(&job.trace_parent)
                        .bind(job.paused_at.map(DbTime))
                        .bind(job.overlap_policy)
                        .bind(job.catchup_policy)
                        .bind(job.catchup_window_sec)
                        .bind(job.sla_ms)
                        .bind(&job.on_failure)
                        .bind(job.schedule.as_ref().map(|p| &p.name))
                        .bind(job.schedule.as_ref().and_then(|p| p.version))
                        .bind(job.schedule_spec.as_ref().map(Json))
                        .fetch_optional(&mut **tx)
                        .await?)
                }

                /// Insert an execution; a second one with the same (job, idempotency key) is
                /// ignored. Whether it was inserted.
                ///
                /// The key is unique among unfinished executions only where the finished ones are
                /// partitioned apart (PostgreSQL, `store::partitions`), so the finished are looked
                /// at first; the conflict clause names no index, so that whichever unique index
                /// the row meets (the table's, or its partition's) turns a concurrent twin away.
                pub(super) async fn execution_insert(tx: &mut sqlx::Transaction<'_, $db>, e: &ExecutionWrite) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input,
                             max_attempts, run_at, created_at, endpoint_version, trace_parent, retry_of, overlap_policy,
                             scheduled_at, sla_ms)
                         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $9, $15
                         WHERE $5 IS NULL OR NOT EXISTS (SELECT 1 FROM executions x WHERE x.job_id = $2 AND x.idempotency_key = $5)
                         ON CONFLICT DO NOTHING",
                    )
                    .bind(&e.execution_id)
                    .bind(&e.job_id)
                    .bind(&e.endpoint)
                    .bind(&e.endpoint_type)
                    .bind(&e.idempotency_key)
                    .bind(e.status)
                    .bind(Json(&e.input))
                    .bind(e.max_attempts)
                    .bind(DbTime(e.run_at))
                    .bind(DbTime(e.created_at))
                    .bind(e.endpoint_version)
                    .bind(&e.trace_parent)
                    .bind(&e.retry_of)
                    .bind(e.overlap_policy)
                    .bind(e.sla_ms)
                    .execute(&mut **tx)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

            }

            #[async_trait::async_trait]
            impl $crate::store::Store for $store {
                $($own)*

                async fn ping(&self) -> StoreResult<()> {
                    sqlx::query("SELECT 1").execute(&self.pool).await?;
                    Ok(())
                }

                fn pool_connections(&self) -> (u32, usize) {
                    (self.pool.size(), self.pool.num_idle())
                }

                async fn cron_upcoming(&self, limit: i64) -> StoreResult<Vec<Job>> {
                    let sql = format!(
                        "SELECT {JOB_COLUMNS} FROM jobs
                         WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at IS NOT NULL
                         ORDER BY cron_next_run_at
                         LIMIT $1"
                    );
                    Ok(sqlx::query_as::<$db, Job>(&sql).bind(limit).fetch_all(&self.pool).await?)
                }

                // ---- deletes and retention ----

                async fn execution_ids_finished(&self, scope: &$crate::store::FinishedScope, limit: i64) -> StoreResult<Vec<String>> {
                    use $crate::store::FinishedScope;
                    let condition = match scope {
                        FinishedScope::CreatedBefore(_) => "created_at < $1",
                        FinishedScope::Job(_) => "job_id = $1",
                        FinishedScope::Endpoint(_) => "endpoint = $1",
                    };
                    // The retention purge reads only the tables it deletes from by row (where
                    // history is in time partitions, the rest go whole: `store::partitions`).
                    let tables = match scope {
                        FinishedScope::CreatedBefore(_) => self.purged_by_row().await?,
                        _ => vec!["executions".to_owned()],
                    };
                    let mut ids = Vec::new();
                    for table in tables {
                        let sql = format!(
                            "SELECT execution_id FROM {table}
                             WHERE {condition} AND status IN ('SUCCESS', 'FAILED', 'CANCELLED')
                             ORDER BY created_at LIMIT $2"
                        );
                        let query = sqlx::query_as::<$db, (String,)>(&sql);
                        let query = match scope {
                            FinishedScope::CreatedBefore(t) => query.bind(DbTime(*t)),
                            FinishedScope::Job(id) => query.bind(id.as_str()),
                            FinishedScope::Endpoint(name) => query.bind(name.as_str()),
                        };
                        let left = limit - ids.len() as i64;
                        ids.extend(query.bind(left).fetch_all(&self.pool).await?.into_iter().map(|(id,)| id));
                        if ids.len() as i64 >= limit {
                            break;
                        }
                    }
                    Ok(ids)
                }

                async fn execution_delete_finished(&self, ids: &[String]) -> StoreResult<u64> {
                    if ids.is_empty() {
                        return Ok(0);
                    }
                    let mut tx = self.begin_write().await?;
                    let list = (1..=ids.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
                    // Only finished ones: whatever changed since the ids were read is left.
                    let finished = format!(
                        "SELECT execution_id FROM executions WHERE execution_id IN ({list})
                         AND status IN ('SUCCESS', 'FAILED', 'CANCELLED')"
                    );
                    let mut deleted = 0;
                    for sql in [
                        format!("DELETE FROM execution_logs WHERE execution_id IN ({finished})"),
                        format!("DELETE FROM attempts WHERE execution_id IN ({finished})"),
                        format!("DELETE FROM executions WHERE execution_id IN ({finished})"),
                    ] {
                        let mut query = sqlx::query(&sql);
                        for id in ids {
                            query = query.bind(id);
                        }
                        deleted = query.execute(&mut *tx).await?.rows_affected();
                    }
                    tx.commit().await?;
                    Ok(deleted)
                }

                async fn job_delete(&self, job_id: &str) -> StoreResult<Deleted> {
                    let mut tx = self.begin_write().await?;
                    // Locked first, as `endpoint_delete` locks: a tick or retry that wrote an
                    // execution before is seen below; one after finds the job gone.
                    if !Self::job_held(&mut tx, job_id, Self::LOCK_EXCLUSIVE).await? {
                        return Ok(Deleted::NotFound);
                    }
                    let unfinished = settled_or_running(
                        "execution_id, created_at",
                        &["job_id = $1".to_owned(), "status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')".to_owned()],
                        "ASC",
                        "$2",
                    );
                    let unfinished: Vec<(String, DateTime<Utc>)> = sqlx::query_as(&unfinished)
                    .bind(job_id)
                    .bind(IN_USE_SHOWN)
                    .fetch_all(&mut *tx)
                    .await?;
                    if !unfinished.is_empty() {
                        return Ok(Deleted::InUse(unfinished.into_iter().map(|(e, _)| e).collect()));
                    }
                    $crate::store::endpoints::delete_executions_of(&mut tx, $crate::store::endpoints::ExecutionsOf::Job, job_id).await?;
                    let done = sqlx::query("DELETE FROM jobs WHERE job_id = $1").bind(job_id).execute(&mut *tx).await?;
                    if done.rows_affected() == 0 {
                        return Ok(Deleted::NotFound);
                    }
                    tx.commit().await?;
                    Ok(Deleted::Deleted)
                }

                async fn job_purge_finished(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
                    // One-shot jobs and retired cron versions older than `before` whose
                    // executions are all gone (purged before them). Locked first (passing over
                    // those a retry holds), then asked again: a retry that wrote an execution
                    // for one before the lock is seen by the second statement.
                    const NO_EXECUTION: &str = "NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status <> 'RUNNING')
                         AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status = 'RUNNING')";
                    let mut tx = self.begin_write().await?;
                    let sql = format!(
                        "SELECT job_id FROM jobs j
                         WHERE created_at < $1 AND (trigger_type <> 'CRON' OR status = 'RETIRED') AND {NO_EXECUTION}
                         ORDER BY created_at LIMIT $2{}",
                        Self::LOCK_EXCLUSIVE_SKIP_LOCKED
                    );
                    let candidates: Vec<(String,)> =
                        sqlx::query_as(&sql).bind(DbTime(before)).bind(limit).fetch_all(&mut *tx).await?;
                    if candidates.is_empty() {
                        return Ok(0);
                    }
                    let list = (1..=candidates.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
                    let sql = format!("DELETE FROM jobs AS j WHERE job_id IN ({list}) AND {NO_EXECUTION}");
                    let mut query = sqlx::query(&sql);
                    for (id,) in &candidates {
                        query = query.bind(id);
                    }
                    let done = query.execute(&mut *tx).await?;
                    tx.commit().await?;
                    Ok(done.rows_affected())
                }

                // ---- jobs ----

                async fn job_insert(&self, job: &JobWrite, execution: Option<&ExecutionWrite>) -> StoreResult<Inserted<Job>> {
                    let mut tx = self.begin_write().await?;
                    if !Self::endpoint_held(&mut tx, &job.endpoint, Self::LOCK_SHARED).await? {
                        return Err(StoreError::ForeignKeyViolation);
                    }
                    let Some(created) = Self::job_insert_row(&mut tx, job).await? else {
                        drop(tx);
                        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE endpoint = $1 AND idempotency_key = $2");
                        let row = sqlx::query_as::<$db, Job>(&sql)
                            .bind(&job.endpoint)
                            .bind(&job.idempotency_key)
                            .fetch_optional(&self.pool)
                            .await?;
                        return Inserted::existing(row);
                    };
                    if let Some(execution) = execution {
                        Self::execution_insert(&mut tx, execution).await?;
                    }
                    tx.commit().await?;
                    Ok(Inserted::Created(created))
                }

                async fn job_insert_many(
                    &self,
                    jobs: &[(&JobWrite, Option<&ExecutionWrite>)],
                ) -> StoreResult<Vec<StoreResult<Inserted<Job>>>> {
                    let mut stored = Vec::with_capacity(jobs.len());
                    let existing_sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE endpoint = $1 AND idempotency_key = $2");
                    // Per backend: the jobs, and the executions of those inserted, committed.
                    let inserted = self.write_jobs(jobs).await?;
                    for ((job, _), inserted) in jobs.iter().zip(inserted) {
                        let Some(created) = inserted else {
                            // Passed over: its key was taken before, or earlier in this batch (the
                            // job that has it, committed: a key taken by a transaction still open
                            // was waited on), or its endpoint was gone.
                            let row = match &job.idempotency_key {
                                Some(key) => sqlx::query_as::<$db, Job>(&existing_sql)
                                    .bind(&job.endpoint)
                                    .bind(key)
                                    .fetch_optional(&self.pool)
                                    .await?,
                                None => None,
                            };
                            let endpoint_gone = || async {
                                let found: Option<(String,)> = sqlx::query_as("SELECT name FROM endpoints WHERE name = $1")
                                    .bind(&job.endpoint)
                                    .fetch_optional(&self.pool)
                                    .await?;
                                StoreResult::Ok(found.is_none())
                            };
                            stored.push(match row {
                                Some(row) => Ok(Inserted::Existing(row)),
                                None if endpoint_gone().await? => Err(StoreError::ForeignKeyViolation),
                                // The job that took the key was deleted since (as `existing`).
                                None => Err(StoreError::UniqueViolation),
                            });
                            continue;
                        };
                        stored.push(Ok(Inserted::Created(created)));
                    }
                    Ok(stored)
                }

                async fn job_get(&self, job_id: &str) -> StoreResult<Option<Job>> {
                    let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = $1");
                    Ok(sqlx::query_as::<$db, Job>(&sql).bind(job_id).fetch_optional(&self.pool).await?)
                }

                async fn job_list(&self, filter: &JobFilter, page: &PageRequest) -> StoreResult<Vec<Job>> {
                    let mut filters: Vec<(&str, &str)> = Vec::new();
                    if let Some(endpoint) = &filter.endpoint {
                        filters.push(("endpoint", endpoint));
                    }
                    if let Some(trigger) = filter.trigger_type {
                        filters.push(("trigger_type", trigger.as_str()));
                    }
                    // The status is one of two words, written in: `RETIRED` pages read the index
                    // of the retired jobs alone (migration 0066), `ACTIVE` ones the list of all.
                    let status = filter.status.map(|s| format!("status = '{}'", s.as_str()));
                    self.list_page_where(JOB_COLUMNS, "jobs", "created_at", "job_id", status.as_deref(), &filters, page).await
                }

                async fn job_replace(&self, old_job_id: &str, new: &JobWrite) -> StoreResult<Option<Job>> {
                    let mut tx = self.begin_write().await?;
                    // Compare-and-set on ACTIVE: of two concurrent updates, one replaces the job.
                    let retired = sqlx::query(
                        "UPDATE jobs SET status = 'RETIRED', retired_at = $2, replaced_by_id = $3
                         WHERE job_id = $1 AND status = 'ACTIVE' AND trigger_type = 'CRON'",
                    )
                    .bind(old_job_id)
                    .bind(DbTime(new.created_at))
                    .bind(&new.job_id)
                    .execute(&mut *tx)
                    .await?;
                    if retired.rows_affected() == 0 {
                        return Ok(None);
                    }
                    Self::cancel_ticks_ahead(&mut tx, old_job_id, new.created_at).await?;
                    if !Self::endpoint_held(&mut tx, &new.endpoint, Self::LOCK_SHARED).await? {
                        return Err(StoreError::ForeignKeyViolation);
                    }
                    let created = Self::job_insert_row(&mut tx, new).await?.ok_or(StoreError::UniqueViolation)?;
                    tx.commit().await?;
                    Ok(Some(created))
                }

                async fn job_retire(&self, job_id: &str) -> StoreResult<bool> {
                    let at = now();
                    let mut tx = self.begin_write().await?;
                    let done = sqlx::query("UPDATE jobs SET status = 'RETIRED', retired_at = $2 WHERE job_id = $1 AND status = 'ACTIVE'")
                        .bind(job_id)
                        .bind(DbTime(at))
                        .execute(&mut *tx)
                        .await?;
                    Self::cancel_ticks_ahead(&mut tx, job_id, at).await?;
                    tx.commit().await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn job_pause(&self, job_id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
                    $crate::store::retrying_moved(|| self.job_pause_once(job_id, at)).await
                }

                async fn job_resume(&self, job_id: &str, next_run_at: Option<DateTime<Utc>>) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "UPDATE jobs SET paused_at = NULL, cron_next_run_at = $2
                         WHERE job_id = $1 AND status = 'ACTIVE' AND paused_at IS NOT NULL",
                    )
                    .bind(job_id)
                    .bind(next_run_at.map(DbTime))
                    .execute(&self.pool)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn job_cancel_waiting(&self, job_id: &str) -> StoreResult<Vec<String>> {
                    $crate::store::retrying_moved(|| self.job_cancel_waiting_once(job_id)).await
                }

                async fn job_versions(&self, job_id: &str, page: &PageRequest) -> StoreResult<Vec<Job>> {
                    // The lineage in one statement: back along previous_version_id to the first
                    // version, then forward along replaced_by_id (primary-key lookups both ways),
                    // a page at a time in creation order, which is version order.
                    let after = if page.after.is_some() { "AND (created_at, job_id) > ($3, $4)" } else { "" };
                    let sql = format!(
                        "WITH RECURSIVE back(job_id, previous_version_id, depth) AS (
                             SELECT job_id, previous_version_id, 0 FROM jobs WHERE job_id = $1
                             UNION ALL
                             SELECT j.job_id, j.previous_version_id, b.depth + 1
                             FROM jobs j JOIN back b ON j.job_id = b.previous_version_id
                             WHERE b.depth < 1000000
                         ),
                         root(job_id) AS (SELECT job_id FROM back ORDER BY depth DESC LIMIT 1),
                         lineage(job_id, replaced_by_id, depth) AS (
                             SELECT j.job_id, j.replaced_by_id, 0 FROM jobs j JOIN root r ON j.job_id = r.job_id
                             UNION ALL
                             SELECT j.job_id, j.replaced_by_id, l.depth + 1
                             FROM jobs j JOIN lineage l ON j.job_id = l.replaced_by_id
                             WHERE l.depth < 1000000
                         )
                         SELECT {JOB_COLUMNS} FROM jobs
                         WHERE job_id IN (SELECT job_id FROM lineage) {after}
                         ORDER BY created_at, job_id
                         LIMIT $2"
                    );
                    let mut query = sqlx::query_as::<$db, Job>(&sql).bind(job_id).bind(page.limit);
                    if let Some(after) = &page.after {
                        query = query.bind(DbTime(after.created_at)).bind(&after.key);
                    }
                    Ok(query.fetch_all(&self.pool).await?)
                }

                async fn job_stats(&self, job_id: &str, completed_since: DateTime<Utc>) -> StoreResult<JobStats> {
                    let active: Vec<(crate::domain::ExecutionStatus, i64)> = sqlx::query_as(
                        "SELECT status, COUNT(*) FROM executions
                         WHERE job_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING')
                         GROUP BY status
                         UNION ALL
                         SELECT status, COUNT(*) FROM executions
                         WHERE job_id = $1 AND status = 'RUNNING'
                         GROUP BY status",
                    )
                    .bind(job_id)
                    .fetch_all(&self.pool)
                    .await?;
                    // Counts and the mean in the database; percentiles from a bounded sample.
                    let (completed, failed, avg_duration_ms): (i64, i64, Option<f64>) = sqlx::query_as(
                        "SELECT CAST(COUNT(*) AS BIGINT),
                                CAST(COALESCE(SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END), 0) AS BIGINT),
                                CAST(AVG(duration_ms) AS DOUBLE PRECISION)
                         FROM executions
                         WHERE job_id = $1 AND status IN ('SUCCESS', 'FAILED') AND completed_at >= $2",
                    )
                    .bind(job_id)
                    .bind(DbTime(completed_since))
                    .fetch_one(&self.pool)
                    .await?;
                    let recent: Vec<(i32,)> = sqlx::query_as(
                        "SELECT duration_ms FROM executions
                         WHERE job_id = $1 AND status IN ('SUCCESS', 'FAILED') AND completed_at >= $2
                           AND duration_ms IS NOT NULL
                         ORDER BY completed_at DESC
                         LIMIT $3",
                    )
                    .bind(job_id)
                    .bind(DbTime(completed_since))
                    .bind(JobStats::SAMPLE)
                    .fetch_all(&self.pool)
                    .await?;
                    let started: Vec<(DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
                        "SELECT due, claimed_at FROM (
                             SELECT COALESCE(scheduled_at, run_at) AS due, claimed_at FROM executions
                             WHERE job_id = $1 AND status <> 'RUNNING' AND claimed_at >= $2
                             UNION ALL
                             SELECT COALESCE(scheduled_at, run_at) AS due, claimed_at FROM executions
                             WHERE job_id = $1 AND status = 'RUNNING' AND claimed_at >= $2
                         ) AS claimed
                         ORDER BY claimed_at DESC
                         LIMIT $3",
                    )
                    .bind(job_id)
                    .bind(DbTime(completed_since))
                    .bind(JobStats::SAMPLE)
                    .fetch_all(&self.pool)
                    .await?;
                    use crate::domain::ExecutionStatus as S;
                    let count = |s: S| active.iter().find(|(status, _)| *status == s).map_or(0, |(_, n)| *n);
                    Ok(JobStats {
                        pending: count(S::Pending),
                        queued: count(S::Queued),
                        running: count(S::Running),
                        retrying: count(S::Retrying),
                        succeeded: completed - failed,
                        failed,
                        avg_duration_ms,
                        recent_durations: recent.into_iter().map(|(d,)| d).collect(),
                        recent_lateness_ms: started
                            .into_iter()
                            .map(|(scheduled, claimed)| (claimed - scheduled).num_milliseconds().max(0))
                            .collect(),
                    })
                }

                // ---- executions ----

                async fn execution_retry_many(&self, retries: &[ExecutionWrite]) -> StoreResult<Vec<Option<Inserted<Execution>>>> {
                    let mut tx = self.begin_write().await?;
                    // Each retry's job held (`LOCK_SHARED`), as a foreign key to it would: a
                    // job deleted meanwhile gets no retry. Held in job id order, the order
                    // `endpoint_delete` locks an endpoint's jobs in, so that the two never wait
                    // on each other in a cycle.
                    let mut jobs: Vec<&str> = retries.iter().map(|r| r.job_id.as_str()).collect();
                    jobs.sort_unstable();
                    jobs.dedup();
                    let mut held = std::collections::HashSet::new();
                    for job in jobs {
                        if Self::job_held(&mut tx, job, Self::LOCK_SHARED).await? {
                            held.insert(job);
                        }
                    }
                    let mut created = Vec::with_capacity(retries.len());
                    for retry in retries {
                        created.push(match held.contains(retry.job_id.as_str()) {
                            true => Some(Self::execution_insert(&mut tx, retry).await?),
                            false => None,
                        });
                    }
                    let mut stored = Vec::with_capacity(retries.len());
                    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM executions WHERE job_id = $1 AND idempotency_key = $2");
                    for (retry, created) in retries.iter().zip(created) {
                        let Some(created) = created else {
                            stored.push(None);
                            continue;
                        };
                        let row = sqlx::query_as::<$db, Execution>(&sql)
                            .bind(&retry.job_id)
                            .bind(&retry.idempotency_key)
                            .fetch_optional(&mut *tx)
                            .await?
                            .ok_or(StoreError::UniqueViolation)?;
                        stored.push(Some(if created { Inserted::Created(row) } else { Inserted::Existing(row) }));
                    }
                    tx.commit().await?;
                    Ok(stored)
                }

                async fn execution_cancel(&self, execution_id: &str) -> StoreResult<bool> {
                    $crate::store::retrying_moved(|| self.execution_cancel_once(execution_id)).await
                }

                // ---- scheduler ----

                async fn cron_next_due(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>> {
                    // Served by idx_jobs_cron_due (partial on active cron jobs, ordered by next tick).
                    let row: Option<(DateTime<Utc>,)> = sqlx::query_as(
                        "SELECT cron_next_run_at FROM jobs
                         WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at IS NOT NULL
                           AND (cron_last_tick_at IS NULL OR cron_last_tick_at <= $1)
                         ORDER BY cron_next_run_at
                         LIMIT 1",
                    )
                    .bind(DbTime(now))
                    .fetch_optional(&self.pool)
                    .await?;
                    Ok(row.map(|(t,)| t))
                }

                async fn cron_due(&self, now: DateTime<Utc>, horizon: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Job>> {
                    let sql = format!(
                        "SELECT {JOB_COLUMNS} FROM jobs
                         WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at <= $1
                           AND (cron_last_tick_at IS NULL OR cron_last_tick_at <= $2)
                         ORDER BY cron_next_run_at
                         LIMIT $3"
                    );
                    Ok(sqlx::query_as::<$db, Job>(&sql)
                        .bind(DbTime(horizon))
                        .bind(DbTime(now))
                        .bind(limit)
                        .fetch_all(&self.pool)
                        .await?)
                }

                async fn cron_advance_many(&self, advances: &[CronAdvance]) -> StoreResult<Vec<bool>> {
                    let mut tx = self.begin_write().await?;
                    // Per backend: the compare-and-set of each job's tick, and the executions of
                    // the ticks that won it.
                    let recorded = Self::advance_ticks(&mut tx, advances).await?;
                    tx.commit().await?;
                    Ok(recorded)
                }

                async fn execution_promote_due(&self, now: DateTime<Utc>, ahead: chrono::Duration) -> StoreResult<Vec<DateTime<Utc>>> {
                    $crate::store::retrying_moved(|| self.execution_promote_due_once(now, ahead)).await
                }

                async fn execution_next_pending(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>> {
                    // Due ticks still PENDING after a promotion are held by their job's overlap
                    // policy: they are looked at again each promotion interval, not in a spin.
                    let row: Option<(DateTime<Utc>,)> = sqlx::query_as(
                        "SELECT run_at FROM executions WHERE status = 'PENDING' AND run_at > $1 ORDER BY run_at LIMIT 1",
                    )
                    .bind(DbTime(now))
                    .fetch_optional(&self.pool)
                    .await?;
                    Ok(row.map(|(t,)| t))
                }

                async fn execution_reclaim_expired(&self, now: DateTime<Utc>) -> StoreResult<u64> {
                    $crate::store::retrying_moved(|| self.execution_reclaim_expired_once(now)).await
                }

                // ---- worker ----

                async fn execution_finish_many(&self, finishes: &[AttemptFinish]) -> StoreResult<$crate::store::FinishedAttempts> {
                    let mut tx = self.begin_bookkeeping().await?;
                    // The fence, per backend: write each execution only if it is still RUNNING
                    // under the attempt number that finished.
                    let written = Self::finish_fenced(&mut tx, finishes).await?;
                    let winners: Vec<&AttemptFinish> = finishes.iter().zip(&written).filter(|(_, w)| **w).map(|(f, _)| f).collect();
                    // In the same transaction: a claim never sees an attempt finished without its
                    // endpoint's circuit breaker having heard of it.
                    let circuit_changes = Self::circuit_record(&mut tx, &winners).await?;
                    Self::record_attempts(&mut tx, &winners).await?;
                    tx.commit().await?;
                    Ok($crate::store::FinishedAttempts { written, circuit_changes })
                }
            }
        };
    };
}

pub(crate) use impl_store;
