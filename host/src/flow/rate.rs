//! An endpoint's rate limit as a token bucket.
//!
//! The bucket's state (tokens, as of a time) is kept on the endpoint's row and spent by claims,
//! which take turns on limited endpoints' rows (see each store's `execution_claim`), so the
//! limit holds across any number of workers. Workers claim when woken and at least every
//! `TE_WORKER_POLL_INTERVAL_MS`; a bucket smaller than what refills between two polls would
//! cap the rate below the limit, so it is never smaller than [`POLL_WINDOW_SEC`] of refill.

use chrono::{DateTime, Utc};

/// The longest a worker goes between claims when idle (its default poll interval).
pub const POLL_WINDOW_SEC: f64 = 0.2;

/// An endpoint's rate limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl RateLimit {
    /// The bucket's size: the burst, or a poll interval's refill when that is more.
    pub fn capacity(&self) -> f64 {
        f64::from(self.burst).max(self.per_second * POLL_WINDOW_SEC)
    }

    /// The tokens at `now`, from `tokens` at `at` (a full bucket when never spent).
    pub fn tokens_at(&self, tokens: Option<f64>, at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> f64 {
        match (tokens, at) {
            (Some(tokens), Some(at)) => {
                let elapsed = (now - at).num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6;
                (tokens + elapsed * self.per_second).min(self.capacity())
            }
            _ => self.capacity(),
        }
    }

    /// How many deliveries may start now with `tokens`.
    pub fn allowance(tokens: f64) -> i32 {
        tokens.floor().clamp(0.0, f64::from(i32::MAX)) as i32
    }
}

/// An endpoint's bucket as its row keeps it: the limit (per second, burst), and the tokens as
/// of a time. `tokens_now` is None for an endpoint without a rate limit.
pub struct StoredBucket {
    pub per_second: Option<f64>,
    pub burst: Option<i32>,
    pub tokens: Option<f64>,
    pub at: Option<DateTime<Utc>>,
}

impl StoredBucket {
    pub fn tokens_now(&self, now: DateTime<Utc>) -> Option<f64> {
        let limit = RateLimit { per_second: self.per_second?, burst: u32::try_from(self.burst?).unwrap_or(1) };
        Some(limit.tokens_at(self.tokens, self.at, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_refills_at_the_rate_up_to_its_capacity() {
        let limit = RateLimit { per_second: 5.0, burst: 2 };
        let at = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let later = |ms| at + chrono::Duration::milliseconds(ms);
        assert_eq!(limit.tokens_at(None, None, at), 2.0, "a bucket never spent is full");
        assert_eq!(limit.tokens_at(Some(0.0), Some(at), later(200)), 1.0);
        assert_eq!(limit.tokens_at(Some(0.0), Some(at), later(10_000)), 2.0, "capped at the burst");
        assert_eq!(limit.tokens_at(Some(1.5), Some(at), later(-100)), 1.5, "a clock behind never drains it");
        assert_eq!(RateLimit::allowance(1.99), 1);
        // A bucket smaller than a poll interval's refill is raised to it.
        assert_eq!(RateLimit { per_second: 100.0, burst: 1 }.capacity(), 20.0);
    }
}
