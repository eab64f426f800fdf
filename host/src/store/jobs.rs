//! Jobs: one row per version of a job, written with its first execution (a one-shot job's
//! fire), replaced version by version (a cron job's update), paused, retired, cancelled,
//! deleted and purged. The statements are in `sql/jobs.sql`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::endpoints::{delete_executions_of, Endpoints, ExecutionsOf};
use super::engine::{settled_or_running, JOB_COLUMNS};
use super::sql::pages::{self, List};
use super::sql::references::IN_USE_SHOWN;
use super::sql::statements::jobs as sql;
use super::sql::{query, Arg, InTx, SqlBackend};
use super::{
    now, retrying_moved, DbTime, Deleted, ExecutionWrite, Inserted, Job, JobFilter, JobStats, JobWrite, PageRequest,
    StoreError, StoreResult,
};
use crate::domain::ExecutionStatus;
use crate::ids::{ExecutionId, JobId};

/// The jobs' part of the store.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Insert a job and, for a one-shot job, its execution, in one transaction. When a job with
    /// the same (endpoint, idempotency_key) exists, nothing is written and it is returned.
    /// [`StoreError::ForeignKeyViolation`] when its endpoint is gone (deleted meanwhile).
    async fn job_insert(&self, job: &JobWrite, execution: Option<&ExecutionWrite>) -> StoreResult<Inserted<Job>>;
    /// [`Jobs::job_insert`] for many jobs in one write; each answered in order, on its own (a
    /// job whose endpoint is gone is `Err(ForeignKeyViolation)`, the others are written). A key
    /// used twice in the batch: the second finds the first. The outer error: nothing written.
    async fn job_insert_many(
        &self,
        jobs: &[(&JobWrite, Option<&ExecutionWrite>)],
    ) -> StoreResult<Vec<StoreResult<Inserted<Job>>>>;
    async fn job_get(&self, job_id: &JobId) -> StoreResult<Option<Job>>;
    /// The job that holds idempotency key `key` on `endpoint`, if one does.
    async fn job_get_by_key(&self, endpoint: &str, key: &str) -> StoreResult<Option<Job>>;
    async fn job_list(&self, filter: &JobFilter, page: &PageRequest) -> StoreResult<Vec<Job>>;
    /// Retire `old_job_id` (if still ACTIVE) and insert `new` as its next version, linked both
    /// ways, in one transaction. None when the old job was no longer active;
    /// [`StoreError::ForeignKeyViolation`] when `new`'s endpoint is gone.
    async fn job_replace(&self, old_job_id: &JobId, new: &JobWrite) -> StoreResult<Option<Job>>;
    /// ACTIVE to RETIRED; whether it changed.
    async fn job_retire(&self, job_id: &JobId) -> StoreResult<bool>;
    /// Delete a job with its executions, attempts and logs, unless an execution of it is
    /// unfinished (`InUse` names them).
    async fn job_delete(&self, job_id: &JobId) -> StoreResult<Deleted>;
    /// Delete up to `limit` one-shot jobs and retired cron versions created before `before`
    /// that have no execution left; how many.
    async fn job_purge_finished(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    /// Pause an ACTIVE, unpaused CRON job: no more ticks (its next is cleared) and its ticks
    /// waiting (made ahead, or held by `buffer_one`) are removed; whether it changed.
    async fn job_pause(&self, job_id: &JobId, at: DateTime<Utc>) -> StoreResult<bool>;
    /// Resume a paused job from `next_run_at`; whether it changed.
    async fn job_resume(&self, job_id: &JobId, next_run_at: Option<DateTime<Utc>>) -> StoreResult<bool>;
    /// Cancel a job's executions that have not started (PENDING, QUEUED, RETRYING) and retire
    /// the job if any were; the ids cancelled.
    async fn job_cancel_waiting(&self, job_id: &JobId) -> StoreResult<Vec<ExecutionId>>;
    async fn job_stats(&self, job_id: &JobId, completed_since: DateTime<Utc>) -> StoreResult<JobStats>;
    /// Every version of the job's lineage (whichever version `job_id` is), oldest first, a
    /// page at a time.
    async fn job_versions(&self, job_id: &JobId, page: &PageRequest) -> StoreResult<Vec<Job>>;
}

/// Insert a job row (ACTIVE); None when its (endpoint, idempotency key) is taken.
pub(super) async fn job_insert_row(tx: &mut impl InTx, job: &JobWrite) -> StoreResult<Option<Job>> {
    query(sql::JOB_INSERT)
        .bind(&job.job_id)
        .bind(&job.endpoint)
        .bind(job.endpoint_type)
        .bind(job.trigger_type)
        .bind(job.version)
        .bind(job.previous_version_id.as_ref())
        .bind(&job.idempotency_key)
        .bind(Arg::json(&job.input))
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
        .bind(job.schedule.as_ref().map(|p| p.name.as_str()))
        .bind(job.schedule.as_ref().and_then(|p| p.version))
        .bind(Arg::json_of(job.schedule_spec.as_ref()))
        .bind(job.cron_jitter_ms)
        .bind(job.expires_at.map(DbTime))
        .bind(&job.on_success)
        .fetch_optional(tx.on())
        .await
}

/// Insert an execution; a second one with the same (job, idempotency key) is ignored. Whether
/// it was inserted.
pub(super) async fn execution_insert(tx: &mut impl InTx, e: &ExecutionWrite) -> StoreResult<bool> {
    let inserted = query(sql::EXECUTION_INSERT)
        .bind(&e.execution_id)
        .bind(&e.job_id)
        .bind(&e.endpoint)
        .bind(e.endpoint_type)
        .bind(&e.idempotency_key)
        .bind(e.status)
        .bind(Arg::json(&e.input))
        .bind(e.max_attempts)
        .bind(DbTime(e.run_at))
        .bind(DbTime(e.created_at))
        .bind(e.endpoint_version)
        .bind(&e.trace_parent)
        .bind(e.retry_of.as_ref())
        .bind(e.overlap_policy)
        .bind(e.sla_ms)
        .bind(e.trigger_reason)
        .bind(e.expires_at.map(DbTime))
        .bind(&e.on_success)
        .bind(&e.concurrency_key)
        .bind(e.concurrency_limit)
        .execute(tx.on())
        .await?;
    Ok(inserted == 1)
}

/// Whether the endpoint exists, held until the transaction ends as a foreign key to it would
/// hold it (not deleted under the jobs about to be written for it).
pub(super) async fn endpoint_held(tx: &mut impl InTx, name: &str) -> StoreResult<bool> {
    let held: Option<(String,)> = query(sql::ENDPOINT_HELD_SHARED).bind(name).fetch_optional(tx.on()).await?;
    Ok(held.is_some())
}

/// Whether the job exists, held until the transaction ends as a foreign key to it would hold
/// it (not deleted under the execution about to be written for it).
pub(super) async fn job_held(tx: &mut impl InTx, job_id: &JobId) -> StoreResult<bool> {
    let held: Option<(String,)> = query(sql::JOB_HELD_SHARED).bind(job_id).fetch_optional(tx.on()).await?;
    Ok(held.is_some())
}

/// The job that holds `key` on `endpoint`, read from `store`'s pool.
async fn job_by_key(store: &impl SqlBackend, endpoint: &str, key: Option<&str>) -> StoreResult<Option<Job>> {
    query(sql::JOB_GET_BY_KEY).bind(endpoint).bind(key).fetch_optional(store.db()).await
}

#[async_trait]
impl<S: SqlBackend> Jobs for S {
    async fn job_get_by_key(&self, endpoint: &str, key: &str) -> StoreResult<Option<Job>> {
        job_by_key(self, endpoint, Some(key)).await
    }

    async fn job_insert(&self, job: &JobWrite, execution: Option<&ExecutionWrite>) -> StoreResult<Inserted<Job>> {
        let mut tx = self.write().await?;
        if !endpoint_held(&mut tx, &job.endpoint).await? {
            return Err(StoreError::ForeignKeyViolation);
        }
        let Some(created) = job_insert_row(&mut tx, job).await? else {
            drop(tx);
            return Inserted::existing(job_by_key(self, &job.endpoint, job.idempotency_key.as_deref()).await?);
        };
        if let Some(execution) = execution {
            execution_insert(&mut tx, execution).await?;
        }
        tx.commit().await?;
        super::keys::admit_written(self, execution).await?;
        Ok(Inserted::Created(created))
    }

    async fn job_insert_many(
        &self,
        jobs: &[(&JobWrite, Option<&ExecutionWrite>)],
    ) -> StoreResult<Vec<StoreResult<Inserted<Job>>>> {
        // Per backend: the jobs, and the executions of those inserted, committed.
        let inserted = self.jobs_write(jobs).await?;
        let written = jobs.iter().zip(&inserted).filter(|(_, i)| i.is_some()).filter_map(|((_, e), _)| *e);
        super::keys::admit_written(self, written).await?;
        let mut stored = Vec::with_capacity(jobs.len());
        for ((job, _), inserted) in jobs.iter().zip(inserted) {
            if let Some(created) = inserted {
                stored.push(Ok(Inserted::Created(created)));
                continue;
            }
            // Passed over: its key was taken before, or earlier in this batch (the job that
            // has it, committed: a key taken by a transaction still open was waited on), or
            // its endpoint was gone.
            let row = match &job.idempotency_key {
                Some(key) => job_by_key(self, &job.endpoint, Some(key)).await?,
                None => None,
            };
            stored.push(match row {
                Some(row) => Ok(Inserted::Existing(row)),
                None => match self.endpoint_get(&job.endpoint).await? {
                    None => Err(StoreError::ForeignKeyViolation),
                    // The job that took the key was deleted since (as `Inserted::existing`).
                    Some(_) => Err(StoreError::UniqueViolation),
                },
            });
        }
        Ok(stored)
    }

    async fn job_get(&self, job_id: &JobId) -> StoreResult<Option<Job>> {
        query(sql::JOB_GET).bind(job_id).fetch_optional(self.db()).await
    }

    async fn job_list(&self, filter: &JobFilter, page: &PageRequest) -> StoreResult<Vec<Job>> {
        let mut filters: Vec<(&str, &str)> = Vec::new();
        if let Some(endpoint) = &filter.endpoint {
            filters.push(("endpoint", endpoint));
        }
        if let Some(trigger) = filter.trigger_type {
            filters.push(("trigger_type", trigger.as_str()));
        }
        // The status is one of two words, written in: `RETIRED` pages read the index of the
        // retired jobs alone (migration 0066), `ACTIVE` ones the list of all.
        let status = filter.status.map(|s| format!("status = '{}'", s.as_str()));
        let mut written: Vec<String> = status.into_iter().collect();
        let mut pattern = None;
        if let Some(tenant) = &filter.tenant {
            match super::sql::pages::tenant_condition("endpoint", tenant) {
                (_, Some(bound)) => pattern = Some(bound),
                (condition, None) => written.push(condition),
            }
        }
        let written = (!written.is_empty()).then(|| written.join(" AND "));
        let patterns: Vec<(&str, &str)> = pattern.iter().map(|p| ("endpoint", p.as_str())).collect();
        let list = List {
            columns: JOB_COLUMNS,
            from: "jobs",
            time_column: "created_at",
            key: "job_id",
            written: written.as_deref(),
            filters: &filters,
            patterns: &patterns,
        };
        pages::page(self.db(), &list, page).await
    }

    async fn job_replace(&self, old_job_id: &JobId, new: &JobWrite) -> StoreResult<Option<Job>> {
        let mut tx = self.write().await?;
        let retired = query(sql::JOB_RETIRE_REPLACED)
            .bind(old_job_id)
            .bind(DbTime(new.created_at))
            .bind(&new.job_id)
            .execute(&mut tx)
            .await?;
        if retired == 0 {
            return Ok(None);
        }
        query(sql::JOB_TICKS_AHEAD_CANCEL).bind(old_job_id).bind(DbTime(new.created_at)).execute(&mut tx).await?;
        if !endpoint_held(&mut tx, &new.endpoint).await? {
            return Err(StoreError::ForeignKeyViolation);
        }
        let created = job_insert_row(&mut tx, new).await?.ok_or(StoreError::UniqueViolation)?;
        tx.commit().await?;
        Ok(Some(created))
    }

    async fn job_retire(&self, job_id: &JobId) -> StoreResult<bool> {
        let at = DbTime(now());
        let mut tx = self.write().await?;
        let retired = query(sql::JOB_RETIRE).bind(job_id).bind(at).execute(&mut tx).await?;
        query(sql::JOB_TICKS_AHEAD_CANCEL).bind(job_id).bind(at).execute(&mut tx).await?;
        tx.commit().await?;
        Ok(retired == 1)
    }

    async fn job_delete(&self, job_id: &JobId) -> StoreResult<Deleted> {
        let mut tx = self.write().await?;
        // Locked first, as `endpoint_delete` locks: a tick or retry that wrote an execution
        // before is seen below; one after finds the job gone.
        let held: Option<(String,)> = query(sql::JOB_HELD_FOR_DELETE).bind(job_id).fetch_optional(&mut tx).await?;
        if held.is_none() {
            return Ok(Deleted::NotFound);
        }
        let unfinished = settled_or_running(
            "execution_id, created_at",
            &["job_id = $1".to_owned(), "status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')".to_owned()],
            "ASC",
            "$2",
        );
        let unfinished: Vec<(String, DateTime<Utc>)> =
            query(&unfinished).bind(job_id).bind(IN_USE_SHOWN).fetch_all(&mut tx).await?;
        if !unfinished.is_empty() {
            return Ok(Deleted::InUse(unfinished.into_iter().map(|(e, _)| e).collect()));
        }
        delete_executions_of(&mut tx, ExecutionsOf::Job, job_id.as_str()).await?;
        if query(sql::JOB_DELETE).bind(job_id).execute(&mut tx).await? == 0 {
            return Ok(Deleted::NotFound);
        }
        tx.commit().await?;
        Ok(Deleted::Deleted)
    }

    async fn job_purge_finished(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        // Locked first (passing over those a retry holds), then asked again: a retry that
        // wrote an execution for one before the lock is seen by the second statement.
        let mut tx = self.write().await?;
        let candidates: Vec<(String,)> =
            query(sql::JOBS_PURGE_CANDIDATES).bind(DbTime(before)).bind(limit).fetch_all(&mut tx).await?;
        if candidates.is_empty() {
            return Ok(0);
        }
        let places: Vec<String> = (1..=candidates.len()).map(|i| format!("${i}")).collect();
        let text = format!(
            "DELETE FROM jobs AS j WHERE job_id IN ({})
               AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status <> 'RUNNING')
               AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status = 'RUNNING')",
            places.join(", ")
        );
        let delete = candidates.into_iter().fold(query(&text), |delete, (id,)| delete.bind(id));
        let deleted = delete.execute(&mut tx).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn job_pause(&self, job_id: &JobId, at: DateTime<Utc>) -> StoreResult<bool> {
        retrying_moved(|| async {
            let mut tx = self.write().await?;
            let paused = query(sql::JOB_PAUSE).bind(job_id).bind(DbTime(at)).execute(&mut tx).await? == 1;
            if paused {
                query(sql::JOB_TICKS_WAITING_DELETE).bind(job_id).bind(DbTime(at)).execute(&mut tx).await?;
            }
            tx.commit().await?;
            Ok(paused)
        })
        .await
    }

    async fn job_resume(&self, job_id: &JobId, next_run_at: Option<DateTime<Utc>>) -> StoreResult<bool> {
        let resumed = query(sql::JOB_RESUME).bind(job_id).bind(next_run_at.map(DbTime)).execute(self.db()).await?;
        Ok(resumed == 1)
    }

    async fn job_cancel_waiting(&self, job_id: &JobId) -> StoreResult<Vec<ExecutionId>> {
        retrying_moved(|| async {
            let at = DbTime(now());
            let mut tx = self.write().await?;
            let cancelled: Vec<(ExecutionId,)> =
                query(sql::JOB_EXECUTIONS_WAITING_CANCEL).bind(job_id).bind(at).fetch_all(&mut tx).await?;
            if !cancelled.is_empty() {
                query(sql::JOB_RETIRE).bind(job_id).bind(at).execute(&mut tx).await?;
            }
            tx.commit().await?;
            Ok(cancelled.into_iter().map(|(id,)| id).collect())
        })
        .await
    }

    async fn job_stats(&self, job_id: &JobId, completed_since: DateTime<Utc>) -> StoreResult<JobStats> {
        let since = DbTime(completed_since);
        let active: Vec<(ExecutionStatus, i64)> =
            query(sql::JOB_STATS_ACTIVE).bind(job_id).fetch_all(self.db()).await?;
        let (completed, failed, avg_duration_ms): (i64, i64, Option<f64>) =
            query(sql::JOB_STATS_COMPLETED).bind(job_id).bind(since).fetch_one(self.db()).await?;
        let recent: Vec<(i32,)> = query(sql::JOB_STATS_DURATIONS)
            .bind(job_id)
            .bind(since)
            .bind(JobStats::SAMPLE)
            .fetch_all(self.db())
            .await?;
        let claimed: Vec<(DateTime<Utc>, DateTime<Utc>)> =
            query(sql::JOB_STATS_CLAIMS).bind(job_id).bind(since).bind(JobStats::SAMPLE).fetch_all(self.db()).await?;
        let count = |s: ExecutionStatus| active.iter().find(|(status, _)| *status == s).map_or(0, |(_, n)| *n);
        Ok(JobStats {
            pending: count(ExecutionStatus::Pending),
            queued: count(ExecutionStatus::Queued),
            running: count(ExecutionStatus::Running),
            retrying: count(ExecutionStatus::Retrying),
            succeeded: completed - failed,
            failed,
            avg_duration_ms,
            recent_durations: recent.into_iter().map(|(d,)| d).collect(),
            recent_lateness_ms: claimed.into_iter().map(|(due, at)| (at - due).num_milliseconds().max(0)).collect(),
        })
    }

    async fn job_versions(&self, job_id: &JobId, page: &PageRequest) -> StoreResult<Vec<Job>> {
        let after = page.after.as_ref();
        query(sql::JOB_VERSIONS)
            .bind(job_id)
            .bind(page.limit)
            .bind(after.map(|a| DbTime(a.created_at)))
            .bind(after.map(|a| a.key.as_str()))
            .fetch_all(self.db())
            .await
    }
}
