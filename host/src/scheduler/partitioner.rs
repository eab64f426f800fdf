//! Loop 7: history in time partitions, where the store keeps it so (PostgreSQL:
//! `store::partitions`). Each round makes the partitions of the next spans ahead of time,
//! and, with a `TE_RETENTION`, drops those wholly older than it: the retention purge of
//! finished executions, attempts and log lines without a row deleted. (The purger still
//! deletes by row what lies outside the partitions, and the jobs left with no execution.)
//!
//! It runs whatever the retention: without partitions made ahead, new history would all go
//! to the DEFAULT partition, which only a row-by-row purge empties. Any number of schedulers
//! may run it at once (the store makes each partition once, and a dropped one is gone).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::health::Beat;
use crate::store::{now, partitions, Store};

/// How often a round runs: a third of a partition's span, within a second and a minute.
pub fn every(retention: Duration) -> Duration {
    (partitions::window(retention) / 3).clamp(Duration::from_secs(1), Duration::from_secs(60))
}

pub async fn run(store: Arc<dyn Store>, retention: Duration, shutdown: CancellationToken, beat: Beat) {
    let window = partitions::window(retention);
    let every = every(retention);
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let at = now();
        let cutoff =
            (!retention.is_zero()).then(|| at - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX));
        let upkept = store.history_upkeep(at, window, cutoff).await;
        crate::metrics::loop_round("partitioner", round.elapsed(), upkept.is_err());
        match upkept {
            Ok(upkept) => {
                if !upkept.made.is_empty() {
                    tracing::debug!(made = ?upkept.made, "Made history partitions ahead.");
                }
                if !upkept.dropped.is_empty() {
                    crate::metrics::purged("executions", upkept.executions_dropped as usize);
                    tracing::info!(dropped = ?upkept.dropped, executions = upkept.executions_dropped,
                        "Dropped history partitions older than TE_RETENTION.");
                }
            }
            Err(error) => tracing::warn!(%error, "Keeping the history partitions failed; retrying next round."),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    beat.stopped();
}
