//! The scheduler's part of the store: cron ticks found and recorded, due executions promoted
//! to the queue, expired leases reclaimed. The statements are in `sql/schedules.sql`; a batch
//! of ticks is written the backend's own way (`SqlBackend::ticks_advance`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::statements::schedules as sql;
use super::sql::{query, Arg, SqlBackend};
use super::{retrying_moved, CronAdvance, DbTime, Job, StoreResult};
use crate::domain::AttemptErrorType;
use crate::ids::AttemptId;

/// The scheduler's part of the store.
#[async_trait]
pub trait Schedules: Send + Sync {
    /// The next ticks of active, unpaused CRON jobs, soonest first: of one tenant's endpoints,
    /// or (None) of every tenant's.
    async fn cron_upcoming(&self, limit: i64, tenant: Option<&str>) -> StoreResult<Vec<Job>>;
    /// How many ACTIVE CRON jobs a tenant has (its quota's count; paused ones count).
    async fn cron_active_count(&self, tenant: &str) -> StoreResult<i64>;
    /// The earliest next tick of an active cron job that may be materialized (one with no tick
    /// still waiting ahead of `now`): when the materializer next has work.
    async fn cron_next_due(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>>;
    /// Active cron jobs whose next tick falls at or before `horizon` and that have no tick
    /// still waiting ahead of `now` (so a job is materialized at most one tick ahead),
    /// earliest first.
    async fn cron_due(&self, now: DateTime<Utc>, horizon: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Job>>;
    /// Record cron ticks in one transaction: for each, compare-and-set the job's next tick and
    /// create the tick's execution (idempotent on its key). Per tick, whether it was recorded
    /// (false: another scheduler advanced that job first).
    async fn cron_advance_many(&self, advances: &[CronAdvance]) -> StoreResult<Vec<bool>>;
    /// PENDING executions whose time has come become QUEUED, and those with no overlap policy
    /// up to `ahead` before their time (a claim never takes one before its `run_at`: the
    /// promotion's own writes are then off the path from a tick's time to its claim); the
    /// `run_at` of each promoted.
    async fn execution_promote_due(
        &self,
        now: DateTime<Utc>,
        ahead: chrono::Duration,
    ) -> StoreResult<Vec<DateTime<Utc>>>;
    /// The earliest `run_at` after `now` of a PENDING execution: when the promoter next has work.
    async fn execution_next_pending(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>>;
    /// RUNNING executions whose lease has expired by the database's clock (their worker is
    /// gone: killed, partitioned) are reclaimed: each gets a failed attempt (`WORKER_LOST`) and
    /// becomes RETRYING (or FAILED when out of attempts). `now` is this process's clock, used
    /// where the database is embedded (SQLite).
    async fn execution_reclaim_expired(&self, now: DateTime<Utc>) -> StoreResult<u64>;
}

#[async_trait]
impl<S: SqlBackend> Schedules for S {
    async fn cron_upcoming(&self, limit: i64, tenant: Option<&str>) -> StoreResult<Vec<Job>> {
        query(sql::CRON_UPCOMING).bind(limit).bind(tenant).fetch_all(self.db()).await
    }

    async fn cron_active_count(&self, tenant: &str) -> StoreResult<i64> {
        let (of_tenant, pattern) = super::sql::pages::tenant_condition("endpoint", tenant);
        let text = format!(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM jobs WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND {}",
            of_tenant.replace('?', "$1")
        );
        let mut count = query(&text);
        if let Some(pattern) = pattern {
            count = count.bind(pattern);
        }
        let (count,): (i64,) = count.fetch_one(self.db()).await?;
        Ok(count)
    }

    async fn cron_next_due(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>> {
        let next: Option<(DateTime<Utc>,)> =
            query(sql::CRON_NEXT_DUE).bind(DbTime(now)).fetch_optional(self.db()).await?;
        Ok(next.map(|(at,)| at))
    }

    async fn cron_due(&self, now: DateTime<Utc>, horizon: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Job>> {
        query(sql::CRON_DUE).bind(DbTime(horizon)).bind(DbTime(now)).bind(limit).fetch_all(self.db()).await
    }

    async fn cron_advance_many(&self, advances: &[CronAdvance]) -> StoreResult<Vec<bool>> {
        let mut tx = self.write().await?;
        let recorded = self.ticks_advance(&mut tx, advances).await?;
        tx.commit().await?;
        let made = advances.iter().zip(&recorded).filter(|(_, won)| **won).filter_map(|(a, _)| a.execution.as_ref());
        super::keys::admit_written(self, made).await?;
        Ok(recorded)
    }

    async fn execution_promote_due(
        &self,
        now: DateTime<Utc>,
        ahead: chrono::Duration,
    ) -> StoreResult<Vec<DateTime<Utc>>> {
        let why = serde_json::json!({
            "skipped": "overlap_policy: an earlier execution of the job was still unfinished at this tick"
        });
        // Ticks of jobs with an overlap policy go through it first, in the same transaction.
        retrying_moved(|| async {
            let mut tx = self.write().await?;
            let skipped =
                query(sql::TICKS_OVERLAPPING_SKIP).bind(DbTime(now)).bind(Arg::json(&why)).execute(&mut tx).await?;
            if skipped > 0 {
                tracing::debug!(skipped, "Skipped cron ticks by overlap policy.");
            }
            let promoted: Vec<(DateTime<Utc>,)> =
                query(sql::EXECUTIONS_PROMOTE).bind(DbTime(now)).bind(DbTime(now + ahead)).fetch_all(&mut tx).await?;
            tx.commit().await?;
            Ok(promoted.into_iter().map(|(at,)| at).collect())
        })
        .await
    }

    async fn execution_next_pending(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>> {
        let next: Option<(DateTime<Utc>,)> =
            query(sql::EXECUTION_NEXT_PENDING).bind(DbTime(now)).fetch_optional(self.db()).await?;
        Ok(next.map(|(at,)| at))
    }

    async fn execution_reclaim_expired(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        let error = serde_json::json!({
            "type": AttemptErrorType::WorkerLost,
            "message": "The worker holding this attempt stopped renewing its lease (it was stopped, or lost the database); the execution was reclaimed.",
            "retryable": true,
        });
        retrying_moved(|| async {
            let mut tx = self.write().await?;
            let reclaimed: Vec<(String, i32, Option<DateTime<Utc>>)> =
                query(sql::EXECUTIONS_RECLAIM).bind(DbTime(now)).fetch_all(&mut tx).await?;
            for (execution_id, attempt, started_at) in &reclaimed {
                query(sql::ATTEMPT_LOST_INSERT)
                    .bind(AttemptId::new().as_str())
                    .bind(execution_id)
                    .bind(*attempt)
                    .bind(DbTime(started_at.unwrap_or(now)))
                    .bind(DbTime(now))
                    .bind(Arg::json(&error))
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(reclaimed.len() as u64)
        })
        .await
    }
}
