//! A CRON job's `jitter_ms`: each tick fires an offset after its time, uniform in
//! `[0, jitter_ms]`, so that many jobs on one schedule (every job at `0 * * * *`) spread over
//! the window instead of all being due at the same instant (EventBridge Scheduler's flexible
//! time window).
//!
//! The offset is fixed per job and tick — the first eight bytes of SHA-256 over the job id and
//! the tick's epoch milliseconds — rather than drawn at random, so that `GET /jobs/{id}/upcoming`
//! can say when each tick will fire, a tick made twice (two schedulers, a backfill) fires at the
//! same time, and successive ticks of one job still vary. A tick's execution keeps the tick's
//! idempotency key; its `run_at` (and `scheduled_at`) is the tick plus the offset.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

/// When a tick at `tick` of job `job_id` with `jitter_ms` (None or 0: none) fires.
pub fn fires_at(job_id: &str, tick: DateTime<Utc>, jitter_ms: Option<i32>) -> DateTime<Utc> {
    let Some(spread) = jitter_ms.and_then(|ms| u64::try_from(ms).ok()).filter(|ms| *ms > 0) else { return tick };
    let digest = Sha256::new().chain_update(job_id.as_bytes()).chain_update(tick.timestamp_millis().to_le_bytes());
    let bytes: [u8; 8] = digest.finalize()[..8].try_into().expect("SHA-256 has 32 bytes");
    let offset = u64::from_le_bytes(bytes) % (spread + 1);
    tick + chrono::Duration::milliseconds(i64::try_from(offset).expect("an offset of at most an hour"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_fixed_per_tick_within_the_window_and_spread_across_jobs() {
        let tick = DateTime::parse_from_rfc3339("2026-11-29T09:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(fires_at("job_a", tick, None), tick);
        assert_eq!(fires_at("job_a", tick, Some(0)), tick);
        assert_eq!(fires_at("job_a", tick, Some(60_000)), fires_at("job_a", tick, Some(60_000)), "fixed");
        let offsets: Vec<i64> =
            (0..1_000).map(|i| (fires_at(&format!("job_{i}"), tick, Some(60_000)) - tick).num_milliseconds()).collect();
        assert!(offsets.iter().all(|ms| (0..=60_000).contains(ms)), "within [0, jitter_ms]");
        // Spread over the window: each sixth of it holds a share near its sixth.
        for sixth in 0..6 {
            let inside = offsets.iter().filter(|ms| **ms / 10_000 == sixth).count();
            assert!((100..=240).contains(&inside), "sixth {sixth} holds {inside} of 1,000");
        }
        // One job's successive ticks vary too.
        let next = tick + chrono::Duration::hours(1);
        let (a, b) = (fires_at("job_a", tick, Some(60_000)) - tick, fires_at("job_a", next, Some(60_000)) - next);
        assert_ne!(a, b);
    }
}
