//! Loop 2: delayed executions become claimable when their time comes.
//!
//! Rather than waking on a fixed interval, the promoter sleeps until the earliest PENDING
//! `run_at` (at most `promote_interval`), and is woken early when a delayed job is created or a
//! cron tick is materialized ahead in this process, so a DELAYED job or a cron tick fires within
//! milliseconds of its time.
//!
//! It promotes [`AHEAD`] of their time the executions no overlap policy holds (a claim never
//! takes one before its `run_at`), and wakes the workers at that time itself. The promotion's
//! writes are then off the path from a tick's time to its claim: on a machine saturated by a
//! backlog, the promotion's transaction at the tick's time took tens of milliseconds (the
//! soak's cron fire lateness, docs/benchmarks.md), where waking a worker takes one.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::{SchedulerConfig, Wakeups};
use crate::health::Beat;
use crate::store::{now, Store};

/// How long before its time an execution without an overlap policy may become QUEUED.
pub const AHEAD: chrono::Duration = chrono::Duration::milliseconds(250);

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
        let promoted = store.execution_promote_due(at, AHEAD).await;
        crate::metrics::loop_round("promoter", round.elapsed(), promoted.is_err());
        match promoted {
            Ok(times) if times.is_empty() => {}
            Ok(times) => {
                tracing::debug!(promoted = times.len(), "Promoted delayed executions.");
                if times.iter().any(|t| *t <= at) {
                    wakeups.work_ready(&store).await;
                }
                let later = wake_times(&times, at);
                if !later.is_empty() {
                    let (store, wakeups) = (store.clone(), wakeups.clone());
                    tokio::spawn(async move {
                        for time in later {
                            let until = (time - now()).to_std().unwrap_or(Duration::ZERO);
                            tokio::time::sleep(until).await;
                            wakeups.work_ready(&store).await;
                        }
                    });
                }
                // Cron jobs whose materialized tick was just released may have their next one made.
                wakeups.cron_changed.notify_one();
            }
            Err(error) => tracing::warn!(%error, "Promoting delayed executions failed; retrying."),
        }
        match store.execution_next_pending(now()).await {
            Ok(Some(next)) => {
                let until = (next - AHEAD - now()).to_std().unwrap_or(Duration::ZERO);
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

/// The distinct times after `at` (to the millisecond) at which executions just promoted
/// become due: when the workers are to be woken for them. Those due already are left out.
fn wake_times(times: &[DateTime<Utc>], at: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut later: Vec<DateTime<Utc>> = times
        .iter()
        .filter(|t| **t > at)
        // Rounded up to the millisecond: a wake never comes before the time it is for.
        .map(|t| {
            let ms = t.timestamp_millis() + i64::from(t.timestamp_subsec_micros() % 1000 != 0);
            DateTime::from_timestamp_millis(ms).unwrap_or(*t)
        })
        .collect();
    later.sort();
    later.dedup();
    later
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_woken_once_per_millisecond_at_or_after_each_time() {
        let at = DateTime::parse_from_rfc3339("2026-11-28T09:00:00Z").unwrap().with_timezone(&Utc);
        let ms = |n: i64| at + chrono::Duration::microseconds(n);
        let times = [ms(-5_000), ms(0), ms(100_000), ms(100_400), ms(100_000), ms(200_001)];
        assert_eq!(wake_times(&times, at), [ms(100_000), ms(101_000), ms(201_000)]);
    }
}
