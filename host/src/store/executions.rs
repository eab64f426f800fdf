//! Writes to executions outside the worker's path: the API's retries, cancels and aborts (and
//! the worker's search for the aborts asked of it), and the deletes of finished history row by
//! row (the retention purge, and a job's or endpoint's delete in small batches). The fixed statements are in `sql/executions.sql`; a delete's is
//! put together for its list of ids.

use std::collections::HashSet;

use async_trait::async_trait;

use super::jobs::{execution_insert, job_held};
use super::sql::statements::executions as sql;
use super::sql::{query, SqlBackend};
use super::{now, retrying_moved, DbTime, Execution, ExecutionWrite, FinishedScope, Inserted, StoreError, StoreResult};
use crate::ids::{ExecutionId, JobId};

/// The executions' writes outside the worker's path.
#[async_trait]
pub trait Executions: Send + Sync {
    /// Insert executions of existing jobs — retries (keyed [`super::RETRY_KEY_PREFIX`] + the
    /// execution each retries), a cron job's manual fires and backfilled ticks — in one
    /// transaction; each as stored: `Created`, or `Existing` when its job already has an
    /// execution with its key (that one, unchanged), or None when its job was deleted meanwhile.
    async fn execution_insert_many(&self, writes: &[ExecutionWrite]) -> StoreResult<Vec<Option<Inserted<Execution>>>>;
    /// Ask the worker holding a RUNNING execution to abort its delivery (`cancel?running=abort`);
    /// whether it is RUNNING. The worker finds it by [`Executions::executions_aborting`].
    async fn execution_abort_request(&self, execution_id: &ExecutionId) -> StoreResult<bool>;
    /// The RUNNING executions held by `worker_id` whose abort was asked for.
    async fn executions_aborting(&self, worker_id: &str) -> StoreResult<Vec<ExecutionId>>;
    /// PENDING, QUEUED or RETRYING to CANCELLED; whether it changed.
    async fn execution_cancel(&self, execution_id: &ExecutionId) -> StoreResult<bool>;
    /// Up to `limit` finished (SUCCESS, FAILED, CANCELLED) executions in `scope`, oldest first.
    async fn execution_ids_finished(&self, scope: &FinishedScope, limit: i64) -> StoreResult<Vec<ExecutionId>>;
    /// Delete these executions with their attempts and logs, in one short transaction, those
    /// still finished; how many.
    async fn execution_delete_finished(&self, ids: &[ExecutionId]) -> StoreResult<u64>;
}

#[async_trait]
impl<S: SqlBackend> Executions for S {
    async fn execution_insert_many(&self, writes: &[ExecutionWrite]) -> StoreResult<Vec<Option<Inserted<Execution>>>> {
        let mut tx = self.write().await?;
        // Each write's job held, as a foreign key to it would hold it: a job deleted meanwhile
        // gets no execution. Held in job id order, the order `endpoint_delete` locks an endpoint's
        // jobs in, so that the two never wait on each other in a cycle.
        let mut jobs: Vec<&JobId> = writes.iter().map(|w| &w.job_id).collect();
        jobs.sort_unstable();
        jobs.dedup();
        let mut held = HashSet::new();
        for job in jobs {
            if job_held(&mut tx, job).await? {
                held.insert(job);
            }
        }
        let mut stored = Vec::with_capacity(writes.len());
        for write in writes {
            if !held.contains(&write.job_id) {
                stored.push(None);
                continue;
            }
            let created = execution_insert(&mut tx, write).await?;
            let row: Execution = query(sql::EXECUTION_GET_BY_KEY)
                .bind(&write.job_id)
                .bind(&write.idempotency_key)
                .fetch_optional(&mut tx)
                .await?
                .ok_or(StoreError::UniqueViolation)?;
            stored.push(Some(if created { Inserted::Created(row) } else { Inserted::Existing(row) }));
        }
        tx.commit().await?;
        super::keys::admit_written(self, writes).await?;
        Ok(stored)
    }

    async fn execution_abort_request(&self, execution_id: &ExecutionId) -> StoreResult<bool> {
        retrying_moved(|| async {
            let asked =
                query(sql::EXECUTION_ABORT_REQUEST).bind(execution_id).bind(DbTime(now())).execute(self.db()).await?;
            Ok(asked == 1)
        })
        .await
    }

    async fn executions_aborting(&self, worker_id: &str) -> StoreResult<Vec<ExecutionId>> {
        let rows: Vec<(ExecutionId,)> = query(sql::EXECUTIONS_ABORTING).bind(worker_id).fetch_all(self.db()).await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn execution_cancel(&self, execution_id: &ExecutionId) -> StoreResult<bool> {
        retrying_moved(|| async {
            let cancelled =
                query(sql::EXECUTION_CANCEL).bind(execution_id).bind(DbTime(now())).execute(self.db()).await?;
            Ok(cancelled == 1)
        })
        .await
    }

    async fn execution_ids_finished(&self, scope: &FinishedScope, limit: i64) -> StoreResult<Vec<ExecutionId>> {
        let (condition, value) = match scope {
            FinishedScope::CreatedBefore(at) => ("created_at < $1", super::sql::Arg::from(DbTime(*at))),
            FinishedScope::Job(id) => ("job_id = $1", id.into()),
            FinishedScope::Endpoint(name) => ("endpoint = $1", name.as_str().into()),
        };
        // The retention purge reads only the tables it deletes from by row (where history is
        // in time partitions, the rest go whole: `store::partitions`).
        let tables = match scope {
            FinishedScope::CreatedBefore(_) => self.purged_by_row().await?,
            _ => vec!["executions".to_owned()],
        };
        let mut ids = Vec::new();
        for table in tables {
            let text = format!(
                "SELECT execution_id FROM {table}
                 WHERE {condition} AND status IN ('SUCCESS', 'FAILED', 'CANCELLED')
                 ORDER BY created_at LIMIT $2"
            );
            let left = limit - ids.len() as i64;
            let found: Vec<(ExecutionId,)> = query(&text).bind(value.clone()).bind(left).fetch_all(self.db()).await?;
            ids.extend(found.into_iter().map(|(id,)| id));
            if ids.len() as i64 >= limit {
                break;
            }
        }
        Ok(ids)
    }

    async fn execution_delete_finished(&self, ids: &[ExecutionId]) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let places: Vec<String> = (1..=ids.len()).map(|i| format!("${i}")).collect();
        // Only finished ones: whatever changed since the ids were read is left.
        let finished = format!(
            "SELECT execution_id FROM executions WHERE execution_id IN ({})
             AND status IN ('SUCCESS', 'FAILED', 'CANCELLED')",
            places.join(", ")
        );
        let mut tx = self.write().await?;
        let mut deleted = 0;
        for text in [
            format!("DELETE FROM execution_logs WHERE execution_id IN ({finished})"),
            format!("DELETE FROM attempts WHERE execution_id IN ({finished})"),
            format!("DELETE FROM executions WHERE execution_id IN ({finished})"),
        ] {
            deleted = ids.iter().fold(query(&text), |delete, id| delete.bind(id)).execute(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }
}
