//! An endpoint's flow control as the API shows it: `rate_limit`, `circuit_breaker` (its
//! settings) and `circuit` (its state), `POST /endpoints/{name}/enable`, and the owner's
//! `pause` and `resume`. The mechanisms are `crate::flow`'s.

use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::EndpointOut;
use crate::api::error::{ApiError, ApiResult};
use crate::api::state::AppState;
use crate::domain::Scope;
use crate::duration::{format_seconds, parse_seconds};
use crate::flow::circuit::Phase;
use crate::flow::concurrency::KeyOrdering;
use crate::flow::{CircuitPolicy, CircuitState, Concurrency, RateLimit};
use crate::store::ShownTo;

/// `rate_limit`: deliveries a second, and how many may start at once after a quiet spell.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitIn {
    /// Deliveries a second (more than 0, at most 100,000; fractions allowed: 0.5 is one every
    /// two seconds).
    pub per_second: f64,
    /// Deliveries that may start at once after a quiet spell (1 to 100,000; default: one
    /// second's worth, at least 1).
    pub burst: Option<u32>,
}

/// The largest `rate_limit.per_second` and `burst`.
const MAX_RATE: f64 = 100_000.0;

/// `rate_limit` within bounds; the burst defaults to a second's worth.
pub fn check_rate_limit(limit: &RateLimitIn) -> ApiResult<RateLimit> {
    let per_second = limit.per_second;
    if !(per_second > 0.0 && per_second <= MAX_RATE) {
        return Err(ApiError::invalid_field(
            "rate_limit.per_second",
            format!("must be more than 0 and at most {MAX_RATE}, got {per_second}"),
        ));
    }
    let burst = limit.burst.unwrap_or_else(|| per_second.ceil().max(1.0) as u32);
    if !(1..=MAX_RATE as u32).contains(&burst) {
        return Err(ApiError::invalid_field(
            "rate_limit.burst",
            format!("must be between 1 and {MAX_RATE}, got {burst}"),
        ));
    }
    Ok(RateLimit { per_second, burst })
}

/// `concurrency`: a key made of each job's input, and how many executions of one key may be in
/// flight at once (see `flow::concurrency`).
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConcurrencyIn {
    /// The key: text and `{{input.field}}` placeholders of the job's input (dotted paths for
    /// nested fields), nothing else; at most 256 bytes once rendered.
    pub key: String,
    /// At most this many executions of one key in flight (QUEUED, RUNNING, or RETRYING when
    /// `fifo`) across all workers, 1 to 10,000. Required unless `ordering` is `fifo`, where it
    /// is 1.
    pub max_in_flight: Option<u32>,
    /// `unordered` (the default): a retrying execution gives its place up while it waits.
    /// `fifo`: one at a time in the order their jobs fire; a retrying execution holds the ones
    /// behind it until it succeeds or finally fails.
    pub ordering: Option<KeyOrdering>,
}

impl From<Concurrency> for ConcurrencyIn {
    fn from(c: Concurrency) -> Self {
        Self { key: c.key, max_in_flight: Some(c.max_in_flight), ordering: Some(c.ordering) }
    }
}

/// `concurrency` checked: the key's form and the bound, each error naming its field.
pub fn check_concurrency(given: ConcurrencyIn) -> ApiResult<Concurrency> {
    Concurrency::new(given.key, given.max_in_flight, given.ordering.unwrap_or_default())
        .map_err(|(field, why)| ApiError::invalid_field(&field, why))
}

/// `circuit_breaker`: after how many consecutive failed deliveries to stop sending, for how
/// long, and when to give up on the endpoint. A failed delivery is one that may succeed later:
/// a timeout, a refused connection, a 408, 429 or 5xx. Any field left out takes its default.
#[derive(Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CircuitBreakerIn {
    /// Consecutive failures that open the circuit (0 to 1,000; default 5; 0 turns the breaker
    /// off).
    pub failure_threshold: Option<u32>,
    /// How long an opened circuit stays open before one probe is let through (100 ms to one
    /// day; default 30,000). Each failed probe doubles it.
    pub cooldown_ms: Option<u64>,
    /// The longest cool-down (at least `cooldown_ms`, at most one day; default 600,000 or
    /// `cooldown_ms` when that is more).
    pub max_cooldown_ms: Option<u64>,
    /// Disable the endpoint once it has failed, without a success, for this long: `90s`,
    /// `15m`, `6h`, `3d` (1 s to 365 d). Off when absent.
    pub auto_disable_after: Option<String>,
}

/// `circuit_breaker` as it applies, defaults filled in.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CircuitBreakerOut {
    pub failure_threshold: u32,
    pub cooldown_ms: u64,
    pub max_cooldown_ms: u64,
    /// As a duration (`3d`); null when the endpoint is never disabled.
    pub auto_disable_after: Option<String>,
}

impl From<CircuitPolicy> for CircuitBreakerOut {
    fn from(p: CircuitPolicy) -> Self {
        Self {
            failure_threshold: p.failure_threshold,
            cooldown_ms: p.cooldown_ms,
            max_cooldown_ms: p.max_cooldown_ms,
            auto_disable_after: p.auto_disable_after_sec.map(|s| format_seconds(i64::try_from(s).unwrap_or(i64::MAX))),
        }
    }
}

/// The circuit breaker's state now.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CircuitOut {
    /// `closed` (delivering), `open` (waiting for `open_until`; nothing is sent) or
    /// `half_open` (one probe at a time; its success closes the circuit).
    #[schema(value_type = String, example = "closed")]
    pub state: &'static str,
    /// Failed deliveries since the last success.
    pub consecutive_failures: i32,
    /// The first failure since the last success.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "crate::api::optional_timestamp")]
    pub failing_since: Option<DateTime<Utc>>,
    /// While open: when one probe will be let through.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "crate::api::optional_timestamp")]
    pub open_until: Option<DateTime<Utc>>,
    /// The current cool-down (doubled by each failed probe).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<i64>,
    /// The last failure's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl CircuitOut {
    pub fn new(state: &CircuitState, now: DateTime<Utc>) -> Self {
        let phase = state.phase(now);
        Self {
            state: phase.as_str(),
            consecutive_failures: state.failures,
            failing_since: state.failing_since,
            open_until: state.open_until.filter(|_| phase == Phase::Open),
            cooldown_ms: state.cooldown_ms.filter(|_| phase != Phase::Closed),
            last_error: state.last_error.clone(),
        }
    }
}

/// The shortest and longest cool-down.
const MIN_COOLDOWN_MS: u64 = 100;
const MAX_COOLDOWN_MS: u64 = 86_400_000;
/// The largest `failure_threshold`.
const MAX_THRESHOLD: u32 = 1000;
/// The longest `auto_disable_after`: a year.
const MAX_AUTO_DISABLE_SEC: i64 = 365 * 86_400;

/// `circuit_breaker` within bounds, defaults filled in.
pub fn check_circuit_breaker(body: &CircuitBreakerIn) -> ApiResult<CircuitPolicy> {
    let defaults = CircuitPolicy::default();
    let failure_threshold = body.failure_threshold.unwrap_or(defaults.failure_threshold);
    if failure_threshold > MAX_THRESHOLD {
        return Err(ApiError::invalid_field(
            "circuit_breaker.failure_threshold",
            format!("must be between 0 (off) and {MAX_THRESHOLD}, got {failure_threshold}"),
        ));
    }
    let cooldown_ms = body.cooldown_ms.unwrap_or(defaults.cooldown_ms);
    if !(MIN_COOLDOWN_MS..=MAX_COOLDOWN_MS).contains(&cooldown_ms) {
        return Err(ApiError::invalid_field(
            "circuit_breaker.cooldown_ms",
            format!("must be between {MIN_COOLDOWN_MS} and {MAX_COOLDOWN_MS} (one day), got {cooldown_ms}"),
        ));
    }
    let max_cooldown_ms = body.max_cooldown_ms.unwrap_or(defaults.max_cooldown_ms.max(cooldown_ms));
    if !(cooldown_ms..=MAX_COOLDOWN_MS).contains(&max_cooldown_ms) {
        return Err(ApiError::invalid_field(
            "circuit_breaker.max_cooldown_ms",
            format!(
                "must be between cooldown_ms ({cooldown_ms}) and {MAX_COOLDOWN_MS} (one day), got {max_cooldown_ms}"
            ),
        ));
    }
    let auto_disable_after_sec = match body.auto_disable_after.as_deref() {
        None => None,
        Some(text) => match parse_seconds(text) {
            Some(seconds @ 1..=MAX_AUTO_DISABLE_SEC) => Some(seconds as u64),
            _ => {
                return Err(ApiError::invalid_field(
                    "circuit_breaker.auto_disable_after",
                    format!("expected a duration from 1s to 365d such as `90s`, `15m`, `6h` or `3d`, got '{text}'"),
                ))
            }
        },
    };
    Ok(CircuitPolicy { failure_threshold, cooldown_ms, max_cooldown_ms, auto_disable_after_sec })
}

/// Enable an endpoint: deliver again after it was disabled, or close its circuit now.
///
/// Forgets its failures and closes its circuit (an open circuit too, without waiting for
/// the cool-down), clears a receiver's 429 pause, and lets its waiting executions go.
#[utoipa::path(post, path = "/endpoints/{name}/enable", tag = "endpoints", params(("name" = String, Path)), responses(
    (status = 200, description = "The endpoint, enabled and with its circuit closed.", body = EndpointOut),
))]
pub(super) async fn enable(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
) -> ApiResult<Json<EndpointOut>> {
    let endpoint = state.store.endpoint_enable(&scope.stored(&name)).await?.ok_or_else(|| super::not_found(&name))?;
    state.wakeups.work_ready(&state.store).await;
    Ok(Json(endpoint.shown_to(&scope).into()))
}

/// Pause an endpoint: none of its executions is claimed until it is resumed.
///
/// Its executions wait (QUEUED or RETRYING, spending no attempt; their lateness counts from
/// their due time), cron ticks are still made, and nothing is failed or retried for the pause.
/// Deliveries already under way finish. Pausing a paused endpoint keeps its first `paused_at`.
#[utoipa::path(post, path = "/endpoints/{name}/pause", tag = "endpoints", params(("name" = String, Path)), responses(
    (status = 200, description = "The endpoint, paused.", body = EndpointOut),
))]
pub(super) async fn pause(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
) -> ApiResult<Json<EndpointOut>> {
    let endpoint = state.store.endpoint_hold(&scope.stored(&name)).await?.ok_or_else(|| super::not_found(&name))?;
    Ok(Json(endpoint.shown_to(&scope).into()))
}

/// Resume a paused endpoint: its waiting executions are delivered again.
#[utoipa::path(post, path = "/endpoints/{name}/resume", tag = "endpoints", params(("name" = String, Path)), responses(
    (status = 200, description = "The endpoint, no longer paused.", body = EndpointOut),
))]
pub(super) async fn resume(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
) -> ApiResult<Json<EndpointOut>> {
    let endpoint = state.store.endpoint_release(&scope.stored(&name)).await?.ok_or_else(|| super::not_found(&name))?;
    state.wakeups.work_ready(&state.store).await;
    Ok(Json(endpoint.shown_to(&scope).into()))
}
