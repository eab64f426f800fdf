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

/// How long to sleep for the next round to start `every` from `at`, put off to the middle of
/// a second. Cron ticks fall on whole seconds, and a round's drop holds every write to the
/// history for up to 20 ms (`store::partitions`): begun half a second from the ticks, it is
/// over long before the next.
fn until_mid_second(at: chrono::DateTime<chrono::Utc>, every: Duration) -> Duration {
    let next = at + chrono::Duration::from_std(every).unwrap_or(chrono::Duration::seconds(60));
    let into_second = next.timestamp_subsec_micros();
    let to_middle = (1_500_000 - into_second) % 1_000_000;
    every + Duration::from_micros(u64::from(to_middle))
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
        // The jobs of expired partitions are deleted for at most a round's period, so that the
        // partitions ahead are made at least every other period (they reach three spans ahead).
        let upkept = store.history_upkeep(at, window, cutoff, every).await;
        // A round that ran out of time with jobs still to delete is followed at once: paused
        // a period between rounds, the purge deleted for half the time, and at ~5,000 one-shot
        // jobs made a second on two busy cores it fell behind them (the soak's history and
        // database grew by a partition's worth every few windows).
        let behind = upkept.as_ref().is_ok_and(|u| u.behind);
        crate::metrics::loop_round("partitioner", round.elapsed(), upkept.is_err());
        match upkept {
            Ok(upkept) => {
                if !upkept.made.is_empty() {
                    tracing::debug!(made = ?upkept.made, "Made history partitions ahead.");
                }
                crate::metrics::purged("executions", upkept.executions_dropped as usize);
                crate::metrics::purged("jobs", upkept.jobs_purged as usize);
                if !upkept.dropped.is_empty() || upkept.jobs_purged > 0 {
                    tracing::info!(dropped = ?upkept.dropped, executions = upkept.executions_dropped, jobs = upkept.jobs_purged,
                        "Dropped history partitions older than TE_RETENTION, with their one-shot jobs.");
                }
            }
            Err(error) => tracing::warn!(%error, "Keeping the history partitions failed; retrying next round."),
        }
        let pause = if behind { Duration::ZERO } else { until_mid_second(now(), every) };
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
    }
    beat.stopped();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_start_at_the_middle_of_a_second() {
        let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&chrono::Utc);
        let every = Duration::from_secs(3);
        assert_eq!(until_mid_second(at("2026-11-28T01:00:00.100Z"), every), Duration::from_millis(3_400));
        assert_eq!(until_mid_second(at("2026-11-28T01:00:00.900Z"), every), Duration::from_millis(3_600));
        assert_eq!(until_mid_second(at("2026-11-28T01:00:00.500Z"), every), every);
    }
}
