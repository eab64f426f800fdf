//! Loop 4: retention. Finished executions (SUCCESS, FAILED, CANCELLED) created more than
//! `TE_RETENTION` ago are deleted with their attempts and logs, then the one-shot jobs and
//! retired cron versions left with no execution, then the audit records as old.
//!
//! Deletes go in batches of [`BATCH`] rows, each its own short transaction, with a pause
//! between batches: the purge never holds locks long, and claims and result writes interleave
//! with it. Any number of schedulers may purge at once: a row deleted twice is deleted once.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::health::Beat;
use crate::store::{now, FinishedScope, Store, StoreResult};

/// Rows per delete.
pub const BATCH: i64 = 500;
/// The pause between batches, so other writers get the database.
const BETWEEN_BATCHES: Duration = Duration::from_millis(20);

pub async fn run(store: Arc<dyn Store>, retention: Duration, every: Duration, shutdown: CancellationToken, beat: Beat) {
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let purged = purge(&store, retention, &shutdown, &beat).await;
        crate::metrics::loop_round("purger", round.elapsed(), purged.is_err());
        match purged {
            Ok((0, 0)) => {}
            Ok((executions, jobs)) => tracing::info!(executions, jobs, "Purged what is older than TE_RETENTION."),
            Err(error) => tracing::warn!(%error, "The retention purge failed; retrying next round."),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    beat.stopped();
}

/// One round: every finished execution older than `retention`, then the jobs left empty; how
/// many of each were deleted.
pub async fn purge(
    store: &Arc<dyn Store>,
    retention: Duration,
    shutdown: &CancellationToken,
    beat: &Beat,
) -> StoreResult<(u64, u64)> {
    let cutoff = now() - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
    let mut executions = 0;
    loop {
        let ids = store.execution_ids_finished(&FinishedScope::CreatedBefore(cutoff), BATCH).await?;
        executions += store.execution_delete_finished(&ids).await?;
        crate::metrics::purged("executions", ids.len());
        beat.beat();
        if (ids.len() as i64) < BATCH || shutdown.is_cancelled() {
            break;
        }
        tokio::time::sleep(BETWEEN_BATCHES).await;
    }
    // Where history is kept in time spans, a job newer than the oldest span kept still has
    // its execution in it: searching among those read every job of the spans not yet dropped
    // (seconds, right after a first purge), and the search's snapshot held back the vacuum
    // of the queue's dead rows meanwhile (benchmarks.md, "Soak").
    let jobs_before = match store.history_kept_from().await? {
        Some(kept_from) => kept_from.min(cutoff),
        None => cutoff,
    };
    let jobs = in_batches("jobs", shutdown, || store.job_purge_finished(jobs_before, BATCH)).await?;
    // The audit trail keeps as long as the history it accounts for.
    in_batches("audit_records", shutdown, || store.audit_purge(cutoff, BATCH)).await?;
    Ok((executions, jobs))
}

/// Run `delete` (a batch of at most [`BATCH`] rows of `kind`) until a batch comes back short or
/// the process stops, pausing between batches; how many rows went.
async fn in_batches<F, Fut>(kind: &'static str, shutdown: &CancellationToken, mut delete: F) -> StoreResult<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<u64>>,
{
    let mut total = 0;
    loop {
        let deleted = delete().await?;
        total += deleted;
        crate::metrics::purged(kind, deleted as usize);
        if (deleted as i64) < BATCH || shutdown.is_cancelled() {
            return Ok(total);
        }
        tokio::time::sleep(BETWEEN_BATCHES).await;
    }
}
