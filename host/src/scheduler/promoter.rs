//! Loop 2: delayed executions become claimable when their time comes.
//!
//! Rather than waking on a fixed interval, the promoter sleeps until the earliest PENDING
//! `run_at` (at most `promote_interval`), and is woken early when a delayed job is created or a
//! cron tick is materialized ahead in this process, so a DELAYED job or a cron tick fires within
//! milliseconds of its time.
//!
//! It promotes up to [`READY_AHEAD`] before their time the executions no overlap policy holds,
//! and wakes the workers at once: a worker claims them as soon as they are QUEUED and starts
//! each at its time (`worker::pipeline`). The promotion's and the claim's writes are then off
//! the path from a tick's time to its start: on a machine saturated by a backlog, the
//! promotion's transaction at the tick's time took tens of milliseconds, and a claim made at
//! that time as long again (the soak's cron fire lateness, docs/benchmarks.md), where a
//! worker's timer is a millisecond late.
//!
//! Executions of an endpoint with a concurrency key are admitted by their key instead
//! (`flow::concurrency`, `store::Keys`): each round admits the keys of those whose time has
//! come, and at most every [`SWEEP_EVERY`] the keys with room that nobody admitted into (a
//! place freed by a cancel, a lost lease or a delete).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{SchedulerConfig, Wakeups};
use crate::health::Beat;
use crate::store::{now, Store, READY_AHEAD};

/// How often the keys with room and executions waiting are looked for.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// The most keys one look takes.
const KEYS_PER_LOOK: i64 = 2_000;

pub async fn run(
    store: Arc<dyn Store>,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    beat: Beat,
) {
    let mut swept = std::time::Instant::now();
    loop {
        beat.beat();
        let at = now();
        let mut sleep = config.promote_interval;
        let round = std::time::Instant::now();
        let promoted = store.execution_promote_due(at, READY_AHEAD).await;
        crate::metrics::loop_round("promoter", round.elapsed(), promoted.is_err());
        match promoted {
            Ok(times) if times.is_empty() => {}
            Ok(times) => {
                tracing::debug!(promoted = times.len(), "Promoted delayed executions.");
                // Due now or within READY_AHEAD: a worker claims them all now.
                wakeups.work_ready(&store).await;
                // Cron jobs whose materialized tick was just released may have their next one made.
                wakeups.cron_changed.notify_one();
            }
            Err(error) => tracing::warn!(%error, "Promoting delayed executions failed; retrying."),
        }
        let sweep = swept.elapsed() >= SWEEP_EVERY;
        if sweep {
            swept = std::time::Instant::now();
        }
        match admit_keys(&*store, at + READY_AHEAD, sweep).await {
            Ok(0) => {}
            Ok(admitted) => {
                tracing::debug!(admitted, "Admitted executions by their concurrency keys.");
                wakeups.work_ready(&store).await;
            }
            Err(error) => tracing::warn!(%error, "Admitting executions by their concurrency keys failed; retrying."),
        }
        match store.execution_next_pending(now()).await {
            Ok(Some(next)) => {
                let until = (next - READY_AHEAD - now()).to_std().unwrap_or(Duration::ZERO);
                sleep = sleep.min(until);
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "Could not read the next delayed execution."),
        }
        // A key's waiting executions are swept for as long as any waits.
        sleep = sleep.min(SWEEP_EVERY);
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(sleep) => {}
            () = wakeups.pending_changed.notified() => {}
        }
    }
    beat.stopped();
}

/// Admit the keys of keyed executions due by `until` that no admission has looked at, and
/// with `sweep` the keys with room and executions waiting; how many became QUEUED.
async fn admit_keys(
    store: &dyn Store,
    until: chrono::DateTime<chrono::Utc>,
    sweep: bool,
) -> crate::store::StoreResult<u64> {
    let mut admitted = 0;
    let unjudged = store.keys_unjudged(until, KEYS_PER_LOOK).await?;
    if !unjudged.is_empty() {
        admitted += store.keys_admit(&unjudged, until).await?;
    }
    if sweep {
        let starved = store.keys_starved(KEYS_PER_LOOK).await?;
        if !starved.is_empty() {
            admitted += store.keys_admit(&starved, until).await?;
        }
    }
    Ok(admitted)
}
