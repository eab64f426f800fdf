//! Embedded SQLite backend: one file, WAL mode, no other service.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, Transaction};

use super::claims::{finish_many, spend_tokens, Claims};
use super::jobs::{endpoint_held, execution_insert, job_insert_row};
use super::sql::statements::sqlite as sql;
use super::sql::{Db, SqlBackend, Tx};
use super::{now, Backend, DbTime, Execution, FinishedAttempts, Signal, Store, StoreResult};
use crate::flow::{RateLimit, StoredBucket};
use crate::ids::{AttemptId, LogId};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn connect(path: &Path, pool_size: u32) -> StoreResult<Self> {
        create_private(path).map_err(|e| super::StoreError::from_sqlx(sqlx::Error::Io(e)))?;
        let options = SqliteConnectOptions::from_str("sqlite:")?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // In WAL mode NORMAL is durable against a process crash; only an OS crash or power
            // loss can lose the last transactions, the usual trade for an embedded store.
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            // Writers queue on SQLite's one write lock; wait for it rather than fail.
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new().max_connections(pool_size.max(1)).connect_with(options).await?;
        Ok(Self { pool })
    }

    /// `BEGIN IMMEDIATE` takes the write lock up front: a deferred transaction that reads and
    /// then writes cannot wait for the lock under WAL and fails with SQLITE_BUSY instead.
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// `at` plus a lease of `ms` milliseconds.
fn lease_until(at: DateTime<Utc>, ms: u128) -> DateTime<Utc> {
    at + chrono::Duration::milliseconds(i64::try_from(ms).unwrap_or(i64::MAX / 2).min(86_400_000 * 365))
}

impl SqliteStore {
    /// The fenced execution writes of a batch: one statement each, which costs little in
    /// process (the transaction's single commit is what counts).
    async fn finish_fenced(
        tx: &mut Transaction<'_, Sqlite>,
        finishes: &[super::AttemptFinish],
    ) -> StoreResult<Vec<bool>> {
        let mut written = Vec::with_capacity(finishes.len());
        for f in finishes {
            let done = sqlx::query(sql::RESULT_WRITE)
                .bind(&f.execution_id)
                .bind(f.attempt_number)
                .bind(f.execution_status)
                .bind(f.output.as_ref().map(sqlx::types::Json))
                .bind(f.execution_status.is_finished().then_some(super::DbTime(f.completed_at)))
                .bind(f.duration_ms)
                .bind(f.retry_at.map(super::DbTime))
                .execute(&mut **tx)
                .await?;
            written.push(done.rows_affected() == 1);
        }
        Ok(written)
    }

    /// The attempts and log lines of the outcomes that won the fence, in multi-row INSERTs.
    async fn record_attempts(tx: &mut Transaction<'_, Sqlite>, winners: &[&super::AttemptFinish]) -> StoreResult<()> {
        if winners.is_empty() {
            return Ok(());
        }
        let mut attempts = sqlx::QueryBuilder::<Sqlite>::new(
            "INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at,
                 duration_ms, output, error, created_at) ",
        );
        attempts.push_values(winners, |mut row, f| {
            row.push_bind(AttemptId::new())
                .push_bind(&f.execution_id)
                .push_bind(f.attempt_number)
                .push_bind(f.attempt_status)
                .push_bind(super::DbTime(f.started_at))
                .push_bind(super::DbTime(f.completed_at))
                .push_bind(f.duration_ms)
                .push_bind(f.output.as_ref().map(sqlx::types::Json))
                .push_bind(f.error.as_ref().map(sqlx::types::Json))
                .push_bind(super::DbTime(f.completed_at));
        });
        attempts.build().execute(&mut **tx).await?;
        let logs: Vec<_> = winners.iter().flat_map(|f| f.logs.iter().map(move |log| (*f, log))).collect();
        // In statements of at most LOG_ROWS_PER_INSERT rows: a batch's logs can be tens of
        // thousands of rows, past SQLite's parameter limit.
        for logs in logs.chunks(LOG_ROWS_PER_INSERT) {
            let mut insert = sqlx::QueryBuilder::<Sqlite>::new(
                "INSERT INTO execution_logs (log_id, execution_id, attempt_number, level, message, logged_at) ",
            );
            insert.push_values(logs, |mut row, (f, log)| {
                row.push_bind(LogId::new())
                    .push_bind(&f.execution_id)
                    .push_bind(f.attempt_number)
                    .push_bind(log.level)
                    .push_bind(&log.message)
                    .push_bind(super::DbTime(log.logged_at));
            });
            insert.build().execute(&mut **tx).await?;
        }
        Ok(())
    }
}

/// Log rows one INSERT writes (6 parameters each: far below SQLite's 32,766 per statement).
const LOG_ROWS_PER_INSERT: usize = 1000;

impl SqliteStore {
    /// A batch of cron ticks, one compare-and-set and one insert per tick (in process, each
    /// statement is cheap; the batch's one commit is what counts).
    async fn advance_ticks(
        tx: &mut Transaction<'_, Sqlite>,
        advances: &[super::CronAdvance],
    ) -> StoreResult<Vec<bool>> {
        let mut recorded = Vec::with_capacity(advances.len());
        for advance in advances {
            let moved = sqlx::query(sql::TICK_ADVANCE)
                .bind(&advance.job_id)
                .bind(super::DbTime(advance.tick))
                .bind(advance.next.map(super::DbTime))
                .bind(super::DbTime(advance.last))
                .execute(&mut **tx)
                .await?;
            let won = moved.rows_affected() == 1;
            if won {
                if let Some(execution) = &advance.execution {
                    execution_insert(tx, execution).await?;
                }
            }
            recorded.push(won);
        }
        Ok(recorded)
    }
}

#[async_trait::async_trait]
impl SqlBackend for SqliteStore {
    fn db(&self) -> Db<'_> {
        Db::Sqlite(&self.pool)
    }

    async fn write(&self) -> StoreResult<Tx> {
        Ok(Tx::Sqlite(self.begin_write().await?))
    }

    /// Jobs (and the executions of those inserted) in one transaction, one row at a time: in
    /// process, each statement is cheap. A job whose (endpoint, idempotency key) is taken, or
    /// whose endpoint is gone, is passed over.
    async fn jobs_write(
        &self,
        jobs: &[(&super::JobWrite, Option<&super::ExecutionWrite>)],
    ) -> StoreResult<Vec<Option<super::Job>>> {
        let mut tx = self.begin_write().await?;
        let mut created = Vec::with_capacity(jobs.len());
        let mut endpoints = std::collections::HashMap::new();
        for (job, execution) in jobs {
            let endpoint = job.endpoint.as_str();
            if !endpoints.contains_key(endpoint) {
                endpoints.insert(endpoint, endpoint_held(&mut tx, endpoint).await?);
            }
            if !endpoints[endpoint] {
                created.push(None);
                continue;
            }
            let inserted = job_insert_row(&mut tx, job).await?;
            if let (Some(_), Some(execution)) = (&inserted, execution) {
                execution_insert(&mut tx, execution).await?;
            }
            created.push(inserted);
        }
        tx.commit().await?;
        Ok(created)
    }

    async fn ticks_advance(&self, tx: &mut Tx, advances: &[super::CronAdvance]) -> StoreResult<Vec<bool>> {
        Self::advance_ticks(tx.sqlite(), advances).await
    }

    async fn results_fence(&self, tx: &mut Tx, finishes: &[super::AttemptFinish]) -> StoreResult<Vec<bool>> {
        Self::finish_fenced(tx.sqlite(), finishes).await
    }

    async fn results_record(&self, tx: &mut Tx, winners: &[&super::AttemptFinish]) -> StoreResult<()> {
        Self::record_attempts(tx.sqlite(), winners).await
    }

    async fn audit_write(&self, records: &[super::AuditRecord]) -> StoreResult<()> {
        // Ten values a row: 100 rows a statement stay far below SQLite's parameter limit.
        let mut tx = self.write().await?;
        for records in records.chunks(100) {
            let mut insert = sqlx::QueryBuilder::<Sqlite>::new(
                "INSERT INTO audit_records (audit_id, tenant, key_id, role, method, route, path, status, request_id, at) ",
            );
            insert.push_values(records, |mut row, r| {
                row.push_bind(&r.audit_id)
                    .push_bind(&r.tenant)
                    .push_bind(&r.key_id)
                    .push_bind(r.role)
                    .push_bind(&r.method)
                    .push_bind(&r.route)
                    .push_bind(&r.path)
                    .push_bind(r.status)
                    .push_bind(&r.request_id)
                    .push_bind(DbTime(r.at));
            });
            insert.build().execute(&mut **tx.sqlite()).await?;
        }
        tx.commit().await
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATIONS.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn pool_connections(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }

    /// Embedded mode is one process: its workers and caches are told in process.
    async fn signal(&self, _signal: Signal) -> StoreResult<()> {
        Ok(())
    }

    async fn listen(&self, _signals: &[(Signal, Arc<tokio::sync::Notify>)]) -> StoreResult<bool> {
        Ok(false)
    }
}

#[async_trait::async_trait]
impl Claims for SqliteStore {
    async fn execution_claim(&self, claim: &super::ClaimParams) -> StoreResult<Vec<Execution>> {
        // The same selection as PostgreSQL's one statement, as a few statements in one write
        // transaction (SQLite has no LATERAL; in process, statements cost no round trips).
        // SQLite has one writer at a time, so no other claimer can take the same rows. The
        // database is embedded, so this process's clock is the database's.
        let mut tx = self.begin_write().await?;
        // Every endpoint with something due, by a loose scan of idx_executions_claim_endpoint,
        // with its max_concurrency and rate-limit bucket.
        type Due = (String, Option<i32>, Option<f64>, Option<i32>, Option<f64>, Option<DateTime<Utc>>, i64);
        let endpoints: Vec<Due> = sqlx::query_as(&format!(
            "WITH RECURSIVE {}
             SELECT q.endpoint, ep.max_concurrency, ep.rate_limit_per_sec, ep.rate_limit_burst, ep.rate_tokens,
                 ep.rate_tokens_at,
                 -- A half-open circuit lets one probe through while none of its executions runs:
                 -- how many run (-1: the circuit is closed).
                 CASE WHEN ep.circuit_open_until IS NULL THEN -1
                      ELSE (SELECT COUNT(*) FROM executions r WHERE r.status = 'RUNNING' AND r.endpoint = q.endpoint)
                 END
             FROM queued q
             LEFT JOIN endpoints ep ON ep.name = q.endpoint
             WHERE q.endpoint IS NOT NULL
               AND (ep.paused_until IS NULL OR ep.paused_until <= $1)
               -- An open circuit, or a disabled endpoint, is passed by.
               AND (ep.circuit_open_until IS NULL OR ep.circuit_open_until <= $1)
               AND ep.disabled_at IS NULL
               -- Nor is one its owner paused.
               AND ep.paused_at IS NULL
               AND EXISTS (SELECT 1 FROM executions x
                           WHERE x.endpoint = q.endpoint AND x.status IN ('QUEUED', 'RETRYING') AND x.run_at <= $2)",
            super::engine::QUEUED_ENDPOINTS
        ))
        .bind(DbTime(claim.now))
        .bind(DbTime(claim.due_by))
        .fetch_all(&mut *tx)
        .await?;
        // The tokens of each rate-limited endpoint's bucket now.
        let mut buckets: Vec<(String, f64)> = Vec::new();
        let due: Vec<(String, i64)> = endpoints
            .into_iter()
            .map(|(e, max_concurrency, per_second, burst, tokens, at, probing)| {
                let mut allowance = i64::from(claim.shares.allowance(&e, max_concurrency));
                if probing >= 0 {
                    allowance = allowance.min(1 - probing);
                }
                if let Some(tokens) = (StoredBucket { per_second, burst, tokens, at }).tokens_now(claim.now) {
                    allowance = allowance.min(i64::from(RateLimit::allowance(tokens)));
                    buckets.push((e.clone(), tokens));
                }
                (e, allowance)
            })
            .filter(|(_, allowance)| *allowance > 0)
            .collect();
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let part = (claim.limit + due.len() as i64 - 1) / due.len() as i64;
        let mut taken: Vec<(usize, DateTime<Utc>, String)> = Vec::new();
        for (endpoint, allowance) in &due {
            let rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(sql::CLAIM_ENDPOINT_DUE)
                .bind(endpoint)
                .bind(DbTime(claim.due_by))
                .bind((*allowance).min(part))
                .fetch_all(&mut *tx)
                .await?;
            // An endpoint's n-th execution here ranks after whatever this worker holds of it.
            let held = claim.shares.held.iter().find(|(e, _)| e == endpoint).map_or(0, |(_, h)| *h as usize);
            taken.extend(rows.into_iter().enumerate().map(|(turn, (id, run_at))| (held + turn, run_at, id)));
        }
        // The claim's slots go first to the endpoints this worker holds fewest of, round-robin
        // among equals (every endpoint's first, then every second, …), earliest due first.
        taken.sort();
        taken.truncate(usize::try_from(claim.limit).unwrap_or(0));
        let ids: Vec<&str> = taken.iter().map(|(_, _, id)| id.as_str()).collect();
        let claimed = sqlx::query_as::<Sqlite, Execution>(sql::CLAIM_TAKE)
            .bind(&claim.worker_id)
            .bind(DbTime(claim.now))
            .bind(DbTime(lease_until(claim.now, claim.lease.as_millis())))
            .bind(serde_json::to_string(&ids).expect("ids serialize"))
            .fetch_all(&mut *tx)
            .await?;
        spend_tokens(&mut tx, &buckets, &claimed, claim.now).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn execution_lease_extend(&self, leases: &[super::LeaseExtend]) -> StoreResult<u64> {
        if leases.is_empty() {
            return Ok(0);
        }
        let at = now();
        let mut tx = self.begin_write().await?;
        let mut extended = 0;
        for lease in leases {
            let done = sqlx::query(sql::LEASE_EXTEND)
                .bind(&lease.execution_id)
                .bind(lease.attempt)
                .bind(DbTime(lease_until(at, u128::try_from(lease.for_ms).unwrap_or(0))))
                .execute(&mut *tx)
                .await?;
            extended += done.rows_affected();
        }
        tx.commit().await?;
        Ok(extended)
    }

    async fn execution_finish_many(&self, finishes: &[super::AttemptFinish]) -> StoreResult<FinishedAttempts> {
        finish_many(self, finishes).await
    }
}

/// Make the database file, when it does not exist yet, readable by its owner alone (0600):
/// it holds every job's input and the hashes of the API keys. SQLite gives its `-wal` and
/// `-shm` files the database file's mode. An existing file keeps the mode it has.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}
