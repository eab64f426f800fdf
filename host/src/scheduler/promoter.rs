//! Loop 2: delayed executions become claimable when their time comes.
//!
//! Rather than waking on a fixed interval, the promoter sleeps until the earliest PENDING
//! `run_at` (at most `promote_interval`), and is woken early when a delayed job is created or a
//! cron tick is materialized ahead in this process, so a DELAYED job or a cron tick fires within
//! milliseconds of its time.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{SchedulerConfig, Wakeups};
use crate::health::Beat;
use crate::store::{now, Store};

pub async fn run(
    store: Arc<dyn Store>,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    beat: Beat,
) {
    loop {
        beat.beat();
        let at = now();
        let mut sleep = config.promote_interval;
        let round = std::time::Instant::now();
        let promoted = store.execution_promote_due(at).await;
        crate::metrics::loop_round("promoter", round.elapsed(), promoted.is_err());
        match promoted {
            Ok(0) => {}
            Ok(promoted) => {
                tracing::debug!(promoted, "Promoted delayed executions.");
                wakeups.work_ready(&store).await;
                // Cron jobs whose materialized tick was just released may have their next one made.
                wakeups.cron_changed.notify_one();
            }
            Err(error) => tracing::warn!(%error, "Promoting delayed executions failed; retrying."),
        }
        match store.execution_next_pending(now()).await {
            Ok(Some(next)) => {
                let until = (next - now()).to_std().unwrap_or(Duration::ZERO);
                sleep = sleep.min(until);
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "Could not read the next delayed execution."),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(sleep) => {}
            () = wakeups.pending_changed.notified() => {}
        }
    }
    beat.stopped();
}
