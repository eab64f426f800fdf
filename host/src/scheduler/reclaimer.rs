//! Loop 3: executions whose worker vanished mid-attempt (killed, partitioned) are retried.
//!
//! A worker holds each execution it claimed under a lease, renewed while it lives (see
//! `worker::lease`). An execution still RUNNING after its lease expired — by the database's
//! clock, the one every process shares — has lost its worker: it gets a failed `WORKER_LOST`
//! attempt and becomes RETRYING (or FAILED when it has used its attempts). A live attempt is
//! never reclaimed, however long its timeout; should a worker that was merely cut off from
//! the database finish late, its write is fenced out by the attempt number.

use std::sync::Arc;

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
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(config.reclaim_interval) => {}
        }
        let round = std::time::Instant::now();
        let reclaimed = store.execution_reclaim_expired(now()).await;
        crate::metrics::loop_round("reclaimer", round.elapsed(), reclaimed.is_err());
        match reclaimed {
            Ok(0) => {}
            Ok(reclaimed) => {
                tracing::warn!(reclaimed, "Reclaimed executions whose worker's lease expired.");
                wakeups.work_ready(&store).await;
            }
            Err(error) => tracing::warn!(%error, "Reclaiming executions with expired leases failed; retrying."),
        }
    }
    beat.stopped();
}
