//! An endpoint's retry policy: its defaults (those docs/api.md lists), its rules, and the backoff
//! between attempts.

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::transport::SpecError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backoff {
    Fixed,
    Linear,
    #[default]
    Exponential,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Total attempts, the first included.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    #[serde(default)]
    pub backoff: Backoff,
    /// Delay before the first retry.
    #[serde(default = "default_initial_delay_ms")]
    pub initial_delay_ms: u64,
    /// Upper bound on any one delay.
    #[serde(default = "default_max_delay_ms")]
    pub max_delay_ms: u64,
    /// No attempt starts later than this after the execution was due (its `scheduled_at`):
    /// past it the execution fails with `DEADLINE_EXCEEDED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<u64>,
}

/// More attempts than this is a loop, not a retry policy.
pub const MAX_ATTEMPTS: u32 = 100;
/// One week: a delay longer than this is better expressed as a DELAYED job.
pub const MAX_DELAY_MS: u64 = 7 * 24 * 3600 * 1000;
/// Thirty days: the longest `max_age_ms`.
pub const MAX_AGE_MS: u64 = 30 * 24 * 3600 * 1000;

fn default_max_attempts() -> u32 {
    1
}
fn default_initial_delay_ms() -> u64 {
    1_000
}
fn default_max_delay_ms() -> u64 {
    60_000
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: default_max_attempts(),
            backoff: Backoff::default(),
            initial_delay_ms: default_initial_delay_ms(),
            max_delay_ms: default_max_delay_ms(),
            max_age_ms: None,
        }
    }
}

impl RetryPolicy {
    /// How many attempts an endpoint's stored `retry_policy` allows an execution (1 if it no
    /// longer parses: it was checked when stored).
    pub fn attempts_allowed(stored: &serde_json::Value) -> i32 {
        Self::parse(Some(stored)).map(|p| p.max_attempts as i32).unwrap_or(1)
    }

    /// Parse a user's `retry_policy` (absent or null means all defaults). Error fields are
    /// prefixed with `retry_policy.`.
    pub fn parse(value: Option<&serde_json::Value>) -> Result<Self, SpecError> {
        let policy: Self = match value {
            None | Some(serde_json::Value::Null) => Self::default(),
            Some(v) => serde_path_to_error::deserialize(v).map_err(|e| {
                let path = e.path().to_string();
                let field = if path == "." { "retry_policy".to_owned() } else { format!("retry_policy.{path}") };
                SpecError::new(field, e.into_inner().to_string())
            })?,
        };
        policy.validate()?;
        Ok(policy)
    }

    fn validate(&self) -> Result<(), SpecError> {
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return Err(SpecError::new("retry_policy.max_attempts", format!("must be between 1 and {MAX_ATTEMPTS}")));
        }
        if self.initial_delay_ms > MAX_DELAY_MS {
            return Err(SpecError::new(
                "retry_policy.initial_delay_ms",
                format!("must be at most {MAX_DELAY_MS} (one week)"),
            ));
        }
        if self.max_delay_ms > MAX_DELAY_MS {
            return Err(SpecError::new(
                "retry_policy.max_delay_ms",
                format!("must be at most {MAX_DELAY_MS} (one week)"),
            ));
        }
        if self.max_age_ms.is_some_and(|age| !(1..=MAX_AGE_MS).contains(&age)) {
            return Err(SpecError::new(
                "retry_policy.max_age_ms",
                format!("must be between 1 and {MAX_AGE_MS} (thirty days)"),
            ));
        }
        if self.max_delay_ms < self.initial_delay_ms {
            return Err(SpecError::new(
                "retry_policy.max_delay_ms",
                format!("must be at least initial_delay_ms ({})", self.initial_delay_ms),
            ));
        }
        Ok(())
    }
}

impl RetryPolicy {
    /// The delay before the retry that follows failed attempt `attempt` (1-based): the
    /// backoff's base delay with ±25% jitter (so retries of many executions that failed
    /// together spread out), capped at `max_delay_ms`.
    pub fn backoff_ms(&self, attempt: u32, rng: &mut impl Rng) -> u64 {
        let attempt = u64::from(attempt.max(1));
        let base = match self.backoff {
            Backoff::Fixed => self.initial_delay_ms,
            Backoff::Linear => self.initial_delay_ms.saturating_mul(attempt),
            Backoff::Exponential => self.initial_delay_ms.saturating_mul(1u64 << (attempt - 1).min(62)),
        };
        let base = base.min(self.max_delay_ms);
        let spread = base / 4;
        let jittered = if spread == 0 { base } else { base - spread + rng.gen_range(0..=2 * spread) };
        jittered.min(self.max_delay_ms)
    }

    /// The last moment an attempt may start for an execution due at `scheduled_at`, when the
    /// policy sets `max_age_ms`.
    pub fn deadline(&self, scheduled_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let age = chrono::Duration::milliseconds(i64::try_from(self.max_age_ms?).ok()?);
        scheduled_at.checked_add_signed(age)
    }

    /// Why an attempt due at `scheduled_at` may not start at `at`: past its deadline.
    pub fn expired(&self, scheduled_at: DateTime<Utc>, at: DateTime<Utc>) -> Option<String> {
        let deadline = self.deadline(scheduled_at)?;
        (at > deadline).then(|| {
            format!(
                "Not attempted: the deadline ({deadline}, retry_policy.max_age_ms {} after it was due) has passed.",
                self.max_age_ms.unwrap_or_default()
            )
        })
    }

    /// The delay before the next attempt: the receiver's `Retry-After` when it sent one
    /// (capped at `max_delay_ms`), otherwise the backoff.
    pub fn next_delay_ms(&self, attempt: u32, retry_after_ms: Option<u64>, rng: &mut impl Rng) -> u64 {
        match retry_after_ms {
            Some(asked) => asked.min(self.max_delay_ms),
            None => self.backoff_ms(attempt, rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    fn policy(backoff: Backoff, initial: u64, max: u64) -> RetryPolicy {
        RetryPolicy { max_attempts: 10, backoff, initial_delay_ms: initial, max_delay_ms: max, max_age_ms: None }
    }

    #[test]
    fn backoff_grows_per_kind_within_the_jitter_band_and_the_cap() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let within = |value: u64, base: u64| value >= base - base / 4 && value <= base + base / 4;
        for attempt in 1..=6u32 {
            let fixed = policy(Backoff::Fixed, 1000, 60_000).backoff_ms(attempt, &mut rng);
            assert!(within(fixed, 1000), "fixed {attempt}: {fixed}");
            let linear = policy(Backoff::Linear, 1000, 60_000).backoff_ms(attempt, &mut rng);
            assert!(within(linear, 1000 * u64::from(attempt)), "linear {attempt}: {linear}");
            let exponential = policy(Backoff::Exponential, 1000, 600_000).backoff_ms(attempt, &mut rng);
            assert!(within(exponential, 1000 << (attempt - 1)), "exponential {attempt}: {exponential}");
        }
        // The cap holds even with jitter, and far attempts do not overflow.
        let capped = policy(Backoff::Exponential, 1000, 30_000);
        for attempt in [6, 20, 100, u32::MAX] {
            assert!(capped.backoff_ms(attempt, &mut rng) <= 30_000);
        }
    }

    #[test]
    fn jitter_spreads_retries() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let p = policy(Backoff::Fixed, 1000, 60_000);
        let values: std::collections::BTreeSet<u64> = (0..50).map(|_| p.backoff_ms(1, &mut rng)).collect();
        assert!(values.len() > 10, "jitter varies the delay: {values:?}");
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let p = policy(Backoff::Exponential, 1000, 30_000);
        assert_eq!(p.next_delay_ms(1, Some(7000), &mut rng), 7000);
        assert_eq!(p.next_delay_ms(1, Some(3_600_000), &mut rng), 30_000);
    }

    #[test]
    fn absent_policy_gets_the_documented_defaults() {
        let p = RetryPolicy::parse(None).unwrap();
        assert_eq!(
            (p.max_attempts, p.backoff, p.initial_delay_ms, p.max_delay_ms),
            (1, Backoff::Exponential, 1000, 60000)
        );
        assert_eq!(RetryPolicy::parse(Some(&json!({"max_attempts": 3}))).unwrap().max_delay_ms, 60000);
    }

    #[test]
    fn rules_name_their_field() {
        let field = |v| RetryPolicy::parse(Some(&v)).unwrap_err().field;
        assert_eq!(field(json!({"max_attempts": 0})), "retry_policy.max_attempts");
        assert_eq!(field(json!({"backoff": "random"})), "retry_policy.backoff");
        assert_eq!(field(json!({"initial_delay_ms": 5000, "max_delay_ms": 10})), "retry_policy.max_delay_ms");
        assert_eq!(field(json!({"max_attempts": "3"})), "retry_policy.max_attempts");
        assert_eq!(field(json!({"retries": 3})), "retry_policy.retries");
    }

    #[test]
    fn max_age_sets_a_deadline_from_when_it_was_due() {
        let policy = RetryPolicy::parse(Some(&json!({"max_attempts": 5, "max_age_ms": 1500}))).unwrap();
        let due = DateTime::parse_from_rfc3339("2026-11-28T10:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(policy.deadline(due), Some(due + chrono::Duration::milliseconds(1500)));
        assert!(policy.expired(due, due + chrono::Duration::milliseconds(1500)).is_none(), "at the deadline: in time");
        let late = policy.expired(due, due + chrono::Duration::milliseconds(1501)).expect("past it");
        assert!(late.contains("max_age_ms 1500"), "{late}");
        assert!(RetryPolicy::default().deadline(due).is_none() && RetryPolicy::default().expired(due, due).is_none());
        for bad in [json!(0), json!(MAX_AGE_MS + 1), json!(-1), json!("1s")] {
            let err = RetryPolicy::parse(Some(&json!({"max_age_ms": bad}))).unwrap_err();
            assert_eq!(err.field, "retry_policy.max_age_ms", "{bad}");
        }
        let shown = serde_json::to_value(RetryPolicy::default()).unwrap();
        assert!(shown.get("max_age_ms").is_none(), "unset is not shown: {shown}");
    }
}
