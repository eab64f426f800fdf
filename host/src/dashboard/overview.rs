//! The overview's figures per endpoint over the last hour: deliveries per minute (succeeded and
//! failed), the failure rate, and fire lateness (how late first attempts started) at p50 and
//! p99, with the small charts that draw them. Computed from the newest executions created in
//! the hour, at most [`SAMPLE_LIMIT`] of them, so the page costs the same on a busy service
//! (it then says how many it counted).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::ExecutionStatus;
use crate::store::ActivitySample;

/// Minutes the charts cover.
pub const WINDOW_MINUTES: i64 = 60;
/// Executions read for the overview.
pub const SAMPLE_LIMIT: i64 = 20_000;
/// Chart size, in SVG user units: two per minute across, bars up to `CHART_HEIGHT`.
const BAR_WIDTH: f64 = 2.0;
const CHART_HEIGHT: f64 = 24.0;

/// One endpoint's hour, ready for the page.
#[derive(Debug, Serialize)]
pub struct EndpointActivity {
    /// `None` for the row that sums every endpoint.
    pub endpoint: Option<String>,
    pub succeeded: u64,
    pub failed: u64,
    /// Failed of finished, in percent, one decimal.
    pub failure_rate_pct: Option<f64>,
    pub lateness_p50_ms: Option<i64>,
    pub lateness_p99_ms: Option<i64>,
    /// The busiest minute's deliveries (the deliveries chart's top).
    pub peak_per_minute: u64,
    pub bars: Vec<Bar>,
    /// The lateness chart: p99 per minute, as bars scaled to the highest.
    pub lateness_bars: Vec<LatenessBar>,
    /// The highest per-minute p99 (the lateness chart's top), in milliseconds.
    pub lateness_peak_ms: i64,
}

/// One minute of the lateness chart.
#[derive(Debug, Serialize, PartialEq)]
pub struct LatenessBar {
    pub x: f64,
    pub y: f64,
    pub height: f64,
}

/// One minute of the deliveries chart: succeeded stacked under failed.
#[derive(Debug, Serialize, PartialEq)]
pub struct Bar {
    pub x: f64,
    pub ok_y: f64,
    pub ok_height: f64,
    pub failed_y: f64,
    pub failed_height: f64,
}

struct Tally {
    /// Per minute of the window, oldest first: (succeeded, failed, lateness of first attempts).
    minutes: Vec<(u64, u64, Vec<i64>)>,
}

impl Default for Tally {
    fn default() -> Self {
        Self { minutes: (0..WINDOW_MINUTES).map(|_| (0, 0, Vec::new())).collect() }
    }
}

impl Tally {
    fn add(&mut self, sample: &ActivitySample, since: DateTime<Utc>) {
        let minute =
            |t: DateTime<Utc>| usize::try_from((t - since).num_minutes()).ok().filter(|m| *m < WINDOW_MINUTES as usize);
        if let Some(m) = sample.completed_at.and_then(minute) {
            match sample.status {
                ExecutionStatus::Success => self.minutes[m].0 += 1,
                ExecutionStatus::Failed => self.minutes[m].1 += 1,
                _ => {}
            }
        }
        if let (Some(m), Some(late)) = (sample.claimed_at.and_then(minute), sample.lateness_ms()) {
            self.minutes[m].2.push(late);
        }
    }

    fn finish(mut self, endpoint: Option<String>) -> EndpointActivity {
        let succeeded = self.minutes.iter().map(|m| m.0).sum::<u64>();
        let failed = self.minutes.iter().map(|m| m.1).sum::<u64>();
        let peak = self.minutes.iter().map(|m| m.0 + m.1).max().unwrap_or(0);
        let scale = |n: u64| if peak == 0 { 0.0 } else { round(n as f64 / peak as f64 * CHART_HEIGHT) };
        let bars = self
            .minutes
            .iter()
            .enumerate()
            .filter(|(_, m)| m.0 + m.1 > 0)
            .map(|(i, m)| {
                let (ok, bad) = (scale(m.0), scale(m.1));
                Bar {
                    x: i as f64 * BAR_WIDTH,
                    ok_y: round(CHART_HEIGHT - ok),
                    ok_height: ok,
                    failed_y: round(CHART_HEIGHT - ok - bad),
                    failed_height: bad,
                }
            })
            .collect();
        let per_minute_p99: Vec<(usize, i64)> = self
            .minutes
            .iter_mut()
            .enumerate()
            .filter_map(|(i, m)| {
                m.2.sort_unstable();
                percentile(&m.2, 0.99).map(|p| (i, p))
            })
            .collect();
        let lateness_peak_ms = per_minute_p99.iter().map(|(_, p)| *p).max().unwrap_or(0);
        let lateness_bars = per_minute_p99
            .iter()
            .map(|(i, p)| {
                // A minute with work shows at least a sliver, however small its lateness.
                let height = if lateness_peak_ms == 0 {
                    1.0
                } else {
                    round((*p as f64 / lateness_peak_ms as f64 * CHART_HEIGHT).max(1.0))
                };
                LatenessBar { x: *i as f64 * BAR_WIDTH, y: round(CHART_HEIGHT - height), height }
            })
            .collect();
        let mut lateness: Vec<i64> = self.minutes.into_iter().flat_map(|m| m.2).collect();
        lateness.sort_unstable();
        let finished = succeeded + failed;
        EndpointActivity {
            endpoint,
            succeeded,
            failed,
            failure_rate_pct: (finished > 0).then(|| round(failed as f64 * 100.0 / finished as f64)),
            lateness_p50_ms: percentile(&lateness, 0.50),
            lateness_p99_ms: percentile(&lateness, 0.99),
            peak_per_minute: peak,
            bars,
            lateness_bars,
            lateness_peak_ms,
        }
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Nearest-rank percentile of sorted values: the smallest value at least `q` of them reach.
fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    let rank = ((sorted.len() as f64) * q).ceil() as usize;
    sorted.get(rank.max(1) - 1).copied()
}

/// The hour up to `now` for every endpoint that had executions in it, busiest first, after a
/// first row summing them all.
pub fn summarize(samples: &[ActivitySample], now: DateTime<Utc>) -> Vec<EndpointActivity> {
    let since = now - chrono::Duration::minutes(WINDOW_MINUTES);
    let mut all = Tally::default();
    let mut by_endpoint: BTreeMap<&str, Tally> = BTreeMap::new();
    for sample in samples {
        all.add(sample, since);
        by_endpoint.entry(sample.endpoint.as_str()).or_default().add(sample, since);
    }
    let mut rows: Vec<EndpointActivity> =
        by_endpoint.into_iter().map(|(name, tally)| tally.finish(Some(name.to_owned()))).collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.succeeded + row.failed));
    rows.insert(0, all.finish(None));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(
        endpoint: &str,
        status: ExecutionStatus,
        minutes_ago: i64,
        late_ms: i64,
        now: DateTime<Utc>,
    ) -> ActivitySample {
        let scheduled = now - chrono::Duration::minutes(minutes_ago) - chrono::Duration::seconds(1);
        let claimed = scheduled + chrono::Duration::milliseconds(late_ms);
        ActivitySample {
            endpoint: endpoint.into(),
            status,
            run_at: scheduled,
            scheduled_at: Some(scheduled),
            claimed_at: Some(claimed),
            completed_at: Some(claimed + chrono::Duration::milliseconds(5)),
            created_at: scheduled,
        }
    }

    #[test]
    fn an_hour_is_counted_per_endpoint_and_minute() {
        let now = Utc::now();
        let mut samples = Vec::new();
        for i in 0..99 {
            samples.push(sample("hooks", ExecutionStatus::Success, 1, i, now));
        }
        samples.push(sample("hooks", ExecutionStatus::Failed, 1, 500, now));
        samples.push(sample("orders", ExecutionStatus::Success, 30, 7, now));
        samples.push(sample("orders", ExecutionStatus::Running, 0, 3, now));
        samples.push(sample("orders", ExecutionStatus::Success, 90, 3, now)); // before the hour
        let rows = summarize(&samples, now);
        assert_eq!(
            rows.iter().map(|r| r.endpoint.as_deref()).collect::<Vec<_>>(),
            [None, Some("hooks"), Some("orders")]
        );
        let hooks = &rows[1];
        assert_eq!((hooks.succeeded, hooks.failed, hooks.failure_rate_pct), (99, 1, Some(1.0)));
        assert_eq!((hooks.lateness_p50_ms, hooks.lateness_p99_ms), (Some(49), Some(98)));
        assert_eq!(hooks.peak_per_minute, 100);
        assert_eq!(hooks.bars.len(), 1, "one busy minute");
        let bar = &hooks.bars[0];
        assert_eq!((bar.ok_height + bar.failed_height).round(), CHART_HEIGHT);
        let orders = &rows[2];
        assert_eq!((orders.succeeded, orders.failed), (1, 0), "running and older executions are not finished ones");
        assert_eq!(orders.lateness_p50_ms, Some(3), "a running execution's start counts for lateness");
        assert_eq!(rows[0].succeeded, 100);
        assert_eq!(summarize(&[], now).len(), 1);
        assert_eq!(summarize(&[], now)[0].failure_rate_pct, None);
    }
}
