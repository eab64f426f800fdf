//! Loop 3: executions whose worker vanished mid-attempt (killed, partitioned) are retried.
//!
//! An execution RUNNING for longer than `TE_STUCK_EXECUTION_TIMEOUT_SEC` is presumed
//! abandoned: it gets a failed `WORKER_LOST` attempt and becomes RETRYING (or FAILED when it
//! has used its attempts). Delivery timeouts are capped below that timeout, so a live worker's
//! attempt is never reclaimed; should one still finish late, its write is fenced out by the
//! attempt number.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{SchedulerConfig, Wakeups};
use crate::store::{now, Store};

pub async fn run(store: Arc<dyn Store>, config: SchedulerConfig, wakeups: Wakeups, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(config.reclaim_interval) => {}
        }
        let at = now();
        let stuck_before =
            at - chrono::Duration::from_std(config.stuck_execution_timeout).unwrap_or(chrono::Duration::MAX);
        match store.execution_reclaim_stuck(at, stuck_before).await {
            Ok(0) => {}
            Ok(reclaimed) => {
                tracing::warn!(reclaimed, "Reclaimed executions abandoned by their workers.");
                wakeups.work_ready(&store).await;
            }
            Err(error) => tracing::warn!(%error, "Reclaiming stuck executions failed; retrying."),
        }
    }
}
