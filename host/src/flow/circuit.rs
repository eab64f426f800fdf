//! An endpoint's circuit breaker: after consecutive failed deliveries it stops sending for a
//! cool-down, then lets one probe through, and closes again on the first success.
//!
//! The state lives on the endpoint's row, so every worker process sees one breaker:
//! - **closed** (`open_until` unset): claims take the endpoint's executions as usual;
//! - **open** (`open_until` in the future): claims pass the endpoint by; its executions wait in
//!   QUEUED or RETRYING, spending no attempts;
//! - **half-open** (`open_until` passed): claims take one execution at a time (none while one
//!   of the endpoint's executions is RUNNING): the probe. Its success closes the circuit; its
//!   failure opens it again for twice the cool-down, up to `max_cooldown_ms`.
//!
//! Outcomes are recorded in the transaction that writes the attempt's result
//! (`Claims::execution_finish_many`), and claims of a limited endpoint lock its row, so no claim
//! sees an attempt finished without the breaker having heard of it.
//!
//! Only what says something about the receiver counts ([`Health`]): a delivery that arrived
//! (any answer the transport calls a success) is `Up`; a retryable failure (timeout,
//! connection refused, 408, 429, 5xx) is `Down`. A permanent failure (a 4xx other than 408/429)
//! is about the message, not the receiver, and a template or store failure never reached it:
//! neither moves the breaker.
//!
//! An endpoint failing without a success for longer than `auto_disable_after` is **disabled**:
//! claims pass it by until `POST /endpoints/{name}/enable`, and its `on_failure` endpoint is
//! told once (`scheduler::failure_notifier`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The breaker's settings for one endpoint (`circuit_breaker` in its definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitPolicy {
    /// Consecutive failed deliveries that open the circuit; 0 turns the breaker off.
    pub failure_threshold: u32,
    /// The first cool-down; each failed probe doubles it.
    pub cooldown_ms: u64,
    /// The longest cool-down.
    pub max_cooldown_ms: u64,
    /// Disable the endpoint once it has been failing, without a success, for this long.
    pub auto_disable_after_sec: Option<u64>,
}

impl Default for CircuitPolicy {
    fn default() -> Self {
        Self { failure_threshold: 5, cooldown_ms: 30_000, max_cooldown_ms: 600_000, auto_disable_after_sec: None }
    }
}

/// What one attempt's outcome says about the receiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Up,
    /// A failed delivery that may succeed later, with its (redacted) error message.
    Down(String),
    /// The receiver said it is unwell (a classifier's `open-circuit` verdict): a failure that
    /// opens the circuit now, whatever the count, for `cooldown_ms` (None: the policy's).
    Trip {
        error: String,
        cooldown_ms: Option<u64>,
    },
}

impl Health {
    /// A failure, counted against the receiver.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Down(_) | Self::Trip { .. })
    }

    /// A failure's error message, to redact or cut before it is stored.
    pub fn error_mut(&mut self) -> Option<&mut String> {
        match self {
            Self::Up => None,
            Self::Down(error) | Self::Trip { error, .. } => Some(error),
        }
    }
}

/// The breaker's state as the endpoint's row keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CircuitState {
    /// Failed deliveries since the last success.
    pub failures: i32,
    /// The first failure since the last success.
    pub failing_since: Option<DateTime<Utc>>,
    /// Unset: closed; in the future: open; passed: half-open.
    pub open_until: Option<DateTime<Utc>>,
    /// The cool-down of the current opening (doubled by each failed probe).
    pub cooldown_ms: Option<i64>,
    /// The last failure's message.
    pub last_error: Option<String>,
    /// When the endpoint was disabled; claims pass it by until it is enabled.
    pub disabled_at: Option<DateTime<Utc>>,
}

/// The breaker's phase at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Closed,
    Open,
    HalfOpen,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

/// A change worth a log line and a metric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Closed to open after `failures` consecutive failures, until `until`.
    Opened { until: DateTime<Utc> },
    /// A failed probe: open again, for `cooldown_ms`.
    Reopened { until: DateTime<Utc>, cooldown_ms: i64 },
    /// A success closed an open or half-open circuit.
    Closed,
    /// Failing for longer than `auto_disable_after`.
    Disabled,
}

impl Transition {
    /// The metric label of the state it leads to.
    pub fn to_label(&self) -> &'static str {
        match self {
            Self::Opened { .. } | Self::Reopened { .. } => "open",
            Self::Closed => "closed",
            Self::Disabled => "disabled",
        }
    }
}

impl CircuitState {
    pub fn phase(&self, now: DateTime<Utc>) -> Phase {
        match self.open_until {
            None => Phase::Closed,
            Some(until) if until > now => Phase::Open,
            Some(_) => Phase::HalfOpen,
        }
    }

    /// Apply one outcome at `now`; the transitions it caused, in order.
    pub fn record(&mut self, policy: &CircuitPolicy, health: &Health, now: DateTime<Utc>) -> Vec<Transition> {
        let mut transitions = Vec::new();
        match health {
            Health::Up => {
                if self.open_until.is_some() {
                    transitions.push(Transition::Closed);
                }
                // A disabled endpoint stays disabled (an attempt started before it was
                // disabled may still succeed): only `enable` brings it back.
                *self = Self { disabled_at: self.disabled_at, ..Self::default() };
            }
            Health::Down(error) | Health::Trip { error, .. } => {
                self.failures = self.failures.saturating_add(1);
                let since = *self.failing_since.get_or_insert(now);
                self.last_error = Some(error.clone());
                let base = i64::try_from(policy.cooldown_ms).unwrap_or(i64::MAX / 4);
                let cap = i64::try_from(policy.max_cooldown_ms).unwrap_or(i64::MAX / 4).max(base);
                let trip = match health {
                    Health::Trip { cooldown_ms, .. } if policy.failure_threshold > 0 => {
                        let asked = cooldown_ms.map_or(base, |ms| i64::try_from(ms).unwrap_or(cap));
                        Some(asked.clamp(1, cap))
                    }
                    _ => None,
                };
                match (trip, self.phase(now)) {
                    // Asked to open: from closed or half-open it opens for the cool-down asked;
                    // an open circuit stays open at least that long.
                    (Some(cooldown), _) => {
                        let until = now + chrono::Duration::milliseconds(cooldown);
                        if self.open_until.is_none_or(|current| current < until) {
                            let reopened = self.open_until.is_some();
                            self.open_until = Some(until);
                            self.cooldown_ms = Some(cooldown);
                            transitions.push(if reopened {
                                Transition::Reopened { until, cooldown_ms: cooldown }
                            } else {
                                Transition::Opened { until }
                            });
                        }
                    }
                    (None, Phase::Closed) if policy.failure_threshold > 0 && self.failures >= threshold(policy) => {
                        let until = now + chrono::Duration::milliseconds(base);
                        self.open_until = Some(until);
                        self.cooldown_ms = Some(base);
                        transitions.push(Transition::Opened { until });
                    }
                    (None, Phase::HalfOpen) => {
                        let cooldown = self.cooldown_ms.unwrap_or(base).saturating_mul(2).clamp(base, cap);
                        let until = now + chrono::Duration::milliseconds(cooldown);
                        self.open_until = Some(until);
                        self.cooldown_ms = Some(cooldown);
                        transitions.push(Transition::Reopened { until, cooldown_ms: cooldown });
                    }
                    // Closed below the threshold, or an attempt that started before the
                    // circuit opened and failed while it was open: counted, nothing more.
                    (None, Phase::Closed | Phase::Open) => {}
                }
                if let Some(after) = policy.auto_disable_after_sec {
                    let after = chrono::Duration::seconds(i64::try_from(after).unwrap_or(i64::MAX / 4_000));
                    if self.disabled_at.is_none() && now - since >= after {
                        self.disabled_at = Some(now);
                        transitions.push(Transition::Disabled);
                    }
                }
            }
        }
        transitions
    }
}

fn threshold(policy: &CircuitPolicy) -> i32 {
    i32::try_from(policy.failure_threshold).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    fn down() -> Health {
        Health::Down("503".into())
    }

    const POLICY: CircuitPolicy =
        CircuitPolicy { failure_threshold: 3, cooldown_ms: 1000, max_cooldown_ms: 3000, auto_disable_after_sec: None };

    #[test]
    fn consecutive_failures_open_it_and_a_success_in_between_starts_the_count_again() {
        let mut state = CircuitState::default();
        assert!(state.record(&POLICY, &down(), at(0)).is_empty());
        assert!(state.record(&POLICY, &down(), at(1)).is_empty());
        assert!(state.record(&POLICY, &Health::Up, at(2)).is_empty());
        assert_eq!(state, CircuitState::default(), "a success forgets the failures");
        for ms in 3..5 {
            assert!(state.record(&POLICY, &down(), at(ms)).is_empty());
        }
        assert_eq!(state.record(&POLICY, &down(), at(5)), vec![Transition::Opened { until: at(1005) }]);
        assert_eq!(
            (state.phase(at(5)), state.phase(at(1004)), state.phase(at(1005))),
            (Phase::Open, Phase::Open, Phase::HalfOpen)
        );
        assert_eq!(state.failing_since, Some(at(3)));
        assert_eq!(state.last_error.as_deref(), Some("503"));
    }

    #[test]
    fn a_failure_while_open_is_counted_but_does_not_extend_the_cool_down() {
        let mut state =
            CircuitState { failures: 3, open_until: Some(at(1000)), cooldown_ms: Some(1000), ..Default::default() };
        assert!(state.record(&POLICY, &down(), at(500)).is_empty());
        assert_eq!((state.failures, state.open_until), (4, Some(at(1000))));
    }

    #[test]
    fn a_failed_probe_doubles_the_cool_down_up_to_the_cap_and_a_good_one_closes_it() {
        let mut state =
            CircuitState { failures: 3, open_until: Some(at(1000)), cooldown_ms: Some(1000), ..Default::default() };
        assert_eq!(
            state.record(&POLICY, &down(), at(1100)),
            vec![Transition::Reopened { until: at(3100), cooldown_ms: 2000 }]
        );
        assert_eq!(
            state.record(&POLICY, &down(), at(3200)),
            vec![Transition::Reopened { until: at(6200), cooldown_ms: 3000 }],
            "capped at max_cooldown_ms"
        );
        assert_eq!(state.record(&POLICY, &Health::Up, at(6300)), vec![Transition::Closed]);
        assert_eq!(state.phase(at(6300)), Phase::Closed);
        assert_eq!(state.failures, 0);
    }

    fn trip(cooldown_ms: Option<u64>) -> Health {
        Health::Trip { error: "body says overloaded".into(), cooldown_ms }
    }

    #[test]
    fn a_trip_opens_it_at_once_for_the_cool_down_asked_within_the_cap() {
        let mut state = CircuitState::default();
        assert_eq!(state.record(&POLICY, &trip(Some(2000)), at(0)), vec![Transition::Opened { until: at(2000) }]);
        assert_eq!((state.failures, state.cooldown_ms), (1, Some(2000)));
        assert_eq!(state.last_error.as_deref(), Some("body says overloaded"));
        // While open, a shorter trip changes nothing; a longer one extends, capped at 3 s.
        assert!(state.record(&POLICY, &trip(Some(10)), at(100)).is_empty());
        assert_eq!(
            state.record(&POLICY, &trip(Some(60_000)), at(200)),
            vec![Transition::Reopened { until: at(3200), cooldown_ms: 3000 }]
        );
        // Without a cool-down of its own it takes the policy's, and a success closes it.
        let mut state = CircuitState::default();
        assert_eq!(state.record(&POLICY, &trip(None), at(0)), vec![Transition::Opened { until: at(1000) }]);
        assert_eq!(state.record(&POLICY, &Health::Up, at(1500)), vec![Transition::Closed]);
    }

    #[test]
    fn a_trip_with_the_breaker_off_is_counted_like_any_failure() {
        let off = CircuitPolicy { failure_threshold: 0, ..POLICY };
        let mut state = CircuitState::default();
        assert!(state.record(&off, &trip(Some(5000)), at(0)).is_empty());
        assert_eq!((state.failures, state.phase(at(0))), (1, Phase::Closed));
    }

    #[test]
    fn a_threshold_of_zero_never_opens_it() {
        let off = CircuitPolicy { failure_threshold: 0, ..POLICY };
        let mut state = CircuitState::default();
        for ms in 0..100 {
            assert!(state.record(&off, &down(), at(ms)).is_empty());
        }
        assert_eq!(state.phase(at(100)), Phase::Closed);
    }

    #[test]
    fn failing_for_longer_than_auto_disable_after_disables_it_once() {
        let policy = CircuitPolicy { auto_disable_after_sec: Some(10), ..POLICY };
        let mut state = CircuitState::default();
        state.record(&policy, &down(), at(0));
        assert!(state.record(&policy, &down(), at(9_999)).is_empty());
        let transitions = state.record(&policy, &down(), at(10_000));
        assert!(transitions.contains(&Transition::Disabled), "{transitions:?}");
        assert_eq!(state.disabled_at, Some(at(10_000)));
        assert!(!state.record(&policy, &down(), at(20_000)).contains(&Transition::Disabled), "once");
        state.record(&policy, &Health::Up, at(20_001));
        assert_eq!(state.disabled_at, Some(at(10_000)), "only enabling brings it back");
    }
}
