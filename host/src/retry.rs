//! An endpoint's retry policy: its defaults (those of the brief) and its rules.

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
}

/// More attempts than this is a loop, not a retry policy.
pub const MAX_ATTEMPTS: u32 = 100;
/// One week: a delay longer than this is better expressed as a DELAYED job.
pub const MAX_DELAY_MS: u64 = 7 * 24 * 3600 * 1000;

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
        }
    }
}

impl RetryPolicy {
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
        if self.max_delay_ms < self.initial_delay_ms {
            return Err(SpecError::new(
                "retry_policy.max_delay_ms",
                format!("must be at least initial_delay_ms ({})", self.initial_delay_ms),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_policy_gets_the_briefs_defaults() {
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
}
