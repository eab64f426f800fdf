//! Embedded SQLite backend: one file, WAL mode, no other service.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, Transaction};

use super::common::impl_store;
// Inside impl_store! the shared imports (chrono, DbTime, Execution, EXECUTION_COLUMNS, …)
// are in scope for the backend's own methods too.
use super::{Backend, Signal, StoreResult};

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    pub async fn connect(path: &Path, pool_size: u32) -> StoreResult<Self> {
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
    async fn begin_write(&self) -> StoreResult<Transaction<'_, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
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
            let done = sqlx::query(
                "UPDATE executions
                 SET status = $3, output = $4, completed_at = $5, duration_ms = $6, worker_id = NULL,
                     run_at = COALESCE($7, run_at)
                 WHERE execution_id = $1 AND status = 'RUNNING' AND attempt_count = $2",
            )
            .bind(&f.execution_id)
            .bind(f.attempt_number)
            .bind(f.execution_status)
            .bind(f.output.as_ref().map(sqlx::types::Json))
            .bind((f.execution_status != "RETRYING").then_some(super::DbTime(f.completed_at)))
            .bind(f.duration_ms)
            .bind(f.retry_at.map(super::DbTime))
            .execute(&mut **tx)
            .await?;
            written.push(done.rows_affected() == 1);
        }
        Ok(written)
    }
}

impl SqliteStore {
    /// A batch of cron ticks, one compare-and-set and one insert per tick (in process, each
    /// statement is cheap; the batch's one commit is what counts).
    async fn advance_ticks(
        tx: &mut Transaction<'_, Sqlite>,
        advances: &[super::CronAdvance],
    ) -> StoreResult<Vec<bool>> {
        let mut recorded = Vec::with_capacity(advances.len());
        for advance in advances {
            // The compare-and-set: only the scheduler that still sees `tick` as next moves it.
            let moved = sqlx::query(
                "UPDATE jobs SET cron_next_run_at = $3, cron_last_tick_at = $2, cron_prev_tick_at = cron_last_tick_at
                 WHERE job_id = $1 AND cron_next_run_at = $2 AND status = 'ACTIVE'",
            )
            .bind(&advance.job_id)
            .bind(super::DbTime(advance.tick))
            .bind(advance.next.map(super::DbTime))
            .execute(&mut **tx)
            .await?;
            let won = moved.rows_affected() == 1;
            if won {
                if let Some(execution) = &advance.execution {
                    Self::execution_insert(tx, execution).await?;
                }
            }
            recorded.push(won);
        }
        Ok(recorded)
    }
}

impl_store!(SqliteStore, Sqlite, {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATIONS.run(&self.pool).await?;
        Ok(())
    }

    async fn execution_claim(&self, worker_id: &str, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Execution>> {
        // SQLite has one writer at a time, so this statement (the select inside included)
        // runs alone: two claimers can never take the same row.
        let sql = format!(
            "UPDATE executions
             SET status = 'RUNNING', worker_id = $1, started_at = $2, attempt_count = attempt_count + 1
             WHERE execution_id IN (
                 SELECT execution_id
                 FROM executions
                 WHERE status IN ('QUEUED', 'RETRYING') AND run_at <= $2
                 ORDER BY run_at
                 LIMIT $3
             )
             RETURNING {EXECUTION_COLUMNS}"
        );
        Ok(sqlx::query_as::<Sqlite, Execution>(&sql)
            .bind(worker_id)
            .bind(DbTime(now))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Embedded mode is one process: its workers and caches are told in process.
    async fn signal(&self, _signal: Signal) -> StoreResult<()> {
        Ok(())
    }

    async fn listen(&self, _signal: Signal, _wake: Arc<tokio::sync::Notify>) -> StoreResult<bool> {
        Ok(false)
    }
});
