//! PostgreSQL (and CockroachDB) backend.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::common::impl_store;
// Inside impl_store! the shared imports (chrono, DbTime, Execution, EXECUTION_COLUMNS, …)
// are in scope for the backend's own methods too.
use super::{Backend, StoreResult};

/// The channel workers LISTEN on and writers NOTIFY when work becomes ready.
const WORK_CHANNEL: &str = "taskexec_work";

pub struct PgStore {
    pool: PgPool,
    /// CockroachDB has neither advisory locks nor LISTEN/NOTIFY; learned once at connect.
    cockroach: bool,
}

impl PgStore {
    pub async fn connect(url: &str, pool_size: u32) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        let (version,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&pool).await?;
        Ok(Self { pool, cockroach: version.contains("CockroachDB") })
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'_, Postgres>> {
        Ok(self.pool.begin().await?)
    }
}

impl PgStore {
    /// The fenced execution writes of a batch in one statement: the batch's columns travel as
    /// arrays and UNNEST turns them back into rows, so a batch of 128 costs one round trip.
    async fn finish_fenced(
        tx: &mut Transaction<'_, Postgres>,
        finishes: &[super::AttemptFinish],
    ) -> StoreResult<Vec<bool>> {
        let ids: Vec<&str> = finishes.iter().map(|f| f.execution_id.as_str()).collect();
        let attempts: Vec<i32> = finishes.iter().map(|f| f.attempt_number).collect();
        let statuses: Vec<&str> = finishes.iter().map(|f| f.execution_status).collect();
        let outputs: Vec<Option<sqlx::types::Json<&serde_json::Value>>> =
            finishes.iter().map(|f| f.output.as_ref().map(sqlx::types::Json)).collect();
        let completed: Vec<Option<chrono::DateTime<chrono::Utc>>> =
            finishes.iter().map(|f| (f.execution_status != "RETRYING").then_some(f.completed_at)).collect();
        let durations: Vec<i32> = finishes.iter().map(|f| f.duration_ms).collect();
        let retry_at: Vec<Option<chrono::DateTime<chrono::Utc>>> = finishes.iter().map(|f| f.retry_at).collect();
        let rows: Vec<(String,)> = sqlx::query_as(
            "UPDATE executions AS e
             SET status = v.status, output = v.output, completed_at = v.completed_at, duration_ms = v.duration_ms,
                 worker_id = NULL, run_at = COALESCE(v.retry_at, e.run_at)
             FROM UNNEST($1::text[], $2::int4[], $3::text[], $4::jsonb[], $5::timestamptz[], $6::int4[], $7::timestamptz[])
                  AS v(execution_id, attempt, status, output, completed_at, duration_ms, retry_at)
             WHERE e.execution_id = v.execution_id AND e.status = 'RUNNING' AND e.attempt_count = v.attempt
             RETURNING e.execution_id",
        )
        .bind(&ids)
        .bind(&attempts)
        .bind(&statuses)
        .bind(&outputs)
        .bind(&completed)
        .bind(&durations)
        .bind(&retry_at)
        .fetch_all(&mut **tx)
        .await?;
        let won: std::collections::HashSet<&str> = rows.iter().map(|(id,)| id.as_str()).collect();
        Ok(finishes.iter().map(|f| won.contains(f.execution_id.as_str())).collect())
    }
}

impl_store!(PgStore, Postgres, {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut migrator = sqlx::migrate!("../migrations/postgres");
        if self.cockroach {
            // CockroachDB has no advisory locks, which sqlx's migrator takes by default to keep
            // two starting servers from migrating at once. Without the lock, two servers starting together may both try a migration; the
            // loser fails on the already-created tables and a restart finds nothing to do.
            migrator.set_locking(false);
        }
        migrator.run(&self.pool).await?;
        Ok(())
    }

    async fn execution_claim(&self, worker_id: &str, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Execution>> {
        // SKIP LOCKED: concurrent claimers pass over each other's rows instead of queueing on
        // them. ARRAY(…) evaluates the locking subquery exactly once; a plain IN (…) may be
        // re-run by the planner, locking rows it then does not update.
        let sql = format!(
            "UPDATE executions
             SET status = 'RUNNING', worker_id = $1, started_at = $2, attempt_count = attempt_count + 1
             WHERE execution_id = ANY(ARRAY(
                 SELECT execution_id
                 FROM executions
                 WHERE status IN ('QUEUED', 'RETRYING') AND run_at <= $2
                 ORDER BY run_at
                 LIMIT $3
                 FOR UPDATE SKIP LOCKED
             ))
             RETURNING {EXECUTION_COLUMNS}"
        );
        Ok(sqlx::query_as::<Postgres, Execution>(&sql)
            .bind(worker_id)
            .bind(DbTime(now))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn work_notify(&self) -> StoreResult<()> {
        if !self.cockroach {
            sqlx::query("SELECT pg_notify($1, '')").bind(WORK_CHANNEL).execute(&self.pool).await?;
        }
        Ok(())
    }

    async fn work_listen(&self, wake: Arc<tokio::sync::Notify>) -> StoreResult<bool> {
        if self.cockroach {
            return Ok(false);
        }
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(WORK_CHANNEL).await?;
        tokio::spawn(async move {
            // recv() reconnects by itself after a dropped connection; while it is down the
            // workers fall back to polling.
            loop {
                match listener.recv().await {
                    Ok(_) => wake.notify_waiters(),
                    Err(error) => {
                        tracing::warn!(%error, "Lost the LISTEN connection; retrying.");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(true)
    }
});
