//! Loop 5: failure and success callbacks. When an execution ends FAILED, the endpoint its job
//! names as `on_failure` (or else its endpoint's `on_failure`) gets an IMMEDIATE job whose
//! input is the failure's summary, so a team hears of failures through any transport. When one
//! ends SUCCESS and its job names `on_success`, that endpoint gets a job whose input is the
//! execution's id and what the receiver answered ([`success_summary`]).
//!
//! An endpoint disabled by its circuit breaker (`auto_disable_after`) is told to its own
//! `on_failure` endpoint the same way, once per disabling (keyed
//! `endpoint_disabled:{name}:{disabled at, ms}`).
//!
//! Each failure is handled once: the callback job is keyed `on_failure:{execution id}` (a
//! second notifier, or a retry after a crash, finds it made), then the execution is marked
//! handled; a success likewise (`on_success:{execution id}`). A callback job's own failure is
//! not announced, and it has no `on_success` of its own, so callbacks never loop. A success is
//! found by an index of those still to announce alone (`on_success` is copied onto each
//! execution of the job), so successes without a callback cost the loop nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::Wakeups;
use crate::domain::tenant::own_name;
use crate::domain::{ExecutionStatus, Trigger};
use crate::health::Beat;
use crate::retry::RetryPolicy;
use crate::store::{now, Endpoint, Execution, ExecutionWrite, Inserted, JobWrite, Store, StoreResult};

/// The idempotency key of a failure's callback job is this prefix and the execution's id.
pub const CALLBACK_KEY_PREFIX: &str = "on_failure:";
/// The idempotency key of a success's callback job is this prefix and the execution's id.
pub const SUCCESS_KEY_PREFIX: &str = "on_success:";
/// The idempotency key of a disabled endpoint's announcement starts with this.
pub const DISABLED_KEY_PREFIX: &str = "endpoint_disabled:";
/// Failures handled per round.
const BATCH: i64 = 100;

pub async fn run(store: Arc<dyn Store>, every: Duration, wakeups: Wakeups, shutdown: CancellationToken, beat: Beat) {
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let handled = notify_failures(&store, &wakeups).await;
        crate::metrics::loop_round("failure_notifier", round.elapsed(), handled.is_err());
        if let Err(error) = handled {
            tracing::warn!(%error, "Announcing failed executions failed; retrying next round.");
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    beat.stopped();
}

/// One round: every failure not yet handled, and every endpoint newly disabled, gets its
/// callback job (when it has a callback); how many callback jobs were made.
pub async fn notify_failures(store: &Arc<dyn Store>, wakeups: &Wakeups) -> StoreResult<usize> {
    let mut made = 0;
    let mut endpoints: HashMap<String, Option<Endpoint>> = HashMap::new();
    loop {
        let failed = store.failures_unhandled(BATCH).await?;
        for execution in &failed {
            if let Some(target) = callback_for(store, execution, &mut endpoints).await? {
                let key = format!("{CALLBACK_KEY_PREFIX}{}", execution.execution_id);
                // The callback continues the trace of the delivery that failed.
                let trace = execution.trace_parent.clone();
                if announce(store, key, summary(execution), trace, &target).await? {
                    made += 1;
                }
            }
            store.failure_handled(&execution.execution_id).await?;
        }
        if made > 0 {
            wakeups.work_ready(store).await;
        }
        if (failed.len() as i64) < BATCH {
            break;
        }
    }
    let announced = notify_disabled(store, &mut endpoints).await? + notify_successes(store, &mut endpoints).await?;
    if announced > 0 {
        wakeups.work_ready(store).await;
    }
    Ok(made + announced)
}

/// Every success with an `on_success` not yet told gets its callback job; how many were made.
async fn notify_successes(
    store: &Arc<dyn Store>,
    endpoints: &mut HashMap<String, Option<Endpoint>>,
) -> StoreResult<usize> {
    let mut made = 0;
    loop {
        let succeeded = store.successes_unhandled(BATCH).await?;
        for execution in &succeeded {
            let target = match execution.on_success.as_deref() {
                Some(name) => endpoint(store, name, endpoints).await?,
                None => None,
            };
            match target {
                Some(target) => {
                    let key = format!("{SUCCESS_KEY_PREFIX}{}", execution.execution_id);
                    let trace = execution.trace_parent.clone();
                    if announce(store, key, success_summary(execution), trace, &target).await? {
                        made += 1;
                    }
                }
                None => tracing::warn!(execution_id = %execution.execution_id, callback = ?execution.on_success,
                    "The success callback endpoint no longer exists; the success is not announced."),
            }
            store.success_handled(&execution.execution_id).await?;
        }
        if (succeeded.len() as i64) < BATCH {
            return Ok(made);
        }
    }
}

/// What an `on_success` endpoint receives as `input`: the execution, and the receiver's answer
/// as the attempt stored it (`response`: for HTTP `status_code`, `headers` and `body`, the body
/// within the stored limit), secrets already redacted from it as in every attempt.
pub fn success_summary(execution: &Execution) -> Value {
    json!({
        "event": "execution.succeeded",
        "execution_id": execution.execution_id,
        "job_id": execution.job_id,
        "endpoint": own_name(&execution.endpoint),
        "attempts": execution.attempt_count,
        "response": execution.output,
        "succeeded_at": execution.completed_at,
        "input": execution.input,
    })
}

/// Every endpoint disabled since the last round gets its `on_failure` endpoint told; how many
/// announcements were made.
async fn notify_disabled(
    store: &Arc<dyn Store>,
    endpoints: &mut HashMap<String, Option<Endpoint>>,
) -> StoreResult<usize> {
    let mut made = 0;
    loop {
        let disabled = store.endpoints_disabled_unannounced(BATCH).await?;
        for endpoint in &disabled {
            let Some(disabled_at) = endpoint.disabled_at else { continue };
            let target = match &endpoint.on_failure {
                Some(name) => self::endpoint(store, name, endpoints).await?,
                None => None,
            };
            if let Some(target) = target {
                let key = format!("{DISABLED_KEY_PREFIX}{}:{}", endpoint.name, disabled_at.timestamp_millis());
                if announce(store, key, disabled_summary(endpoint, disabled_at), None, &target).await? {
                    made += 1;
                }
            }
            tracing::warn!(endpoint = %endpoint.name, "Endpoint disabled: it failed for longer than its auto_disable_after; POST /endpoints/{{name}}/enable brings it back.");
            store.endpoint_disabled_announced(&endpoint.name, disabled_at).await?;
        }
        if (disabled.len() as i64) < BATCH {
            return Ok(made);
        }
    }
}

/// What an `on_failure` endpoint receives when the endpoint it watches is disabled.
pub fn disabled_summary(endpoint: &Endpoint, disabled_at: chrono::DateTime<chrono::Utc>) -> Value {
    json!({
        "event": "endpoint.disabled",
        "endpoint": own_name(&endpoint.name),
        "disabled_at": disabled_at,
        "failing_since": endpoint.circuit_failing_since,
        "consecutive_failures": endpoint.circuit_failures,
        "last_error": endpoint.circuit_last_error,
    })
}

/// The endpoint a failure is told to, if any: the job's `on_failure`, else its endpoint's;
/// none for a callback job's own failure, or when the endpoint named no longer exists.
async fn callback_for(
    store: &Arc<dyn Store>,
    execution: &Execution,
    endpoints: &mut HashMap<String, Option<Endpoint>>,
) -> StoreResult<Option<Endpoint>> {
    let Some(job) = store.job_get(&execution.job_id).await? else { return Ok(None) };
    if job
        .idempotency_key
        .as_deref()
        .is_some_and(|k| k.starts_with(CALLBACK_KEY_PREFIX) || k.starts_with(DISABLED_KEY_PREFIX))
    {
        return Ok(None);
    }
    let own = match &job.on_failure {
        Some(name) => Some(name.clone()),
        None => endpoint(store, &execution.endpoint, endpoints).await?.and_then(|e| e.on_failure),
    };
    let Some(name) = own else { return Ok(None) };
    let target = endpoint(store, &name, endpoints).await?;
    if target.is_none() {
        tracing::warn!(execution_id = %execution.execution_id, callback = %name, "The failure callback endpoint no longer exists; the failure is not announced.");
    }
    Ok(target)
}

async fn endpoint(
    store: &Arc<dyn Store>,
    name: &str,
    endpoints: &mut HashMap<String, Option<Endpoint>>,
) -> StoreResult<Option<Endpoint>> {
    if !endpoints.contains_key(name) {
        endpoints.insert(name.to_owned(), store.endpoint_get(name).await?);
    }
    Ok(endpoints[name].clone())
}

/// The failure's summary: what a callback receives as `input`.
pub fn summary(execution: &Execution) -> Value {
    json!({
        "event": "execution.failed",
        "execution_id": execution.execution_id,
        "job_id": execution.job_id,
        "endpoint": own_name(&execution.endpoint),
        "attempts": execution.attempt_count,
        "error": execution.output.as_ref().and_then(|o| o.get("error")).cloned().unwrap_or(Value::Null),
        "failed_at": execution.completed_at,
        "input": execution.input,
    })
}

/// Make the callback job, keyed `key`, with `input`; whether it is new (false: made before,
/// by another round).
async fn announce(
    store: &Arc<dyn Store>,
    key: String,
    input: Value,
    trace_parent: Option<String>,
    target: &Endpoint,
) -> StoreResult<bool> {
    let at = now();
    let job =
        JobWrite { idempotency_key: Some(key), input, trace_parent, ..JobWrite::on(target, Trigger::Immediate, at) };
    let max_attempts = RetryPolicy::attempts_allowed(&target.retry_policy);
    let callback =
        ExecutionWrite::first_of(&job, ExecutionStatus::Queued, at, max_attempts).keyed(target.concurrency.as_ref());
    let inserted = store.job_insert(&job, Some(&callback)).await?;
    Ok(matches!(inserted, Inserted::Created(_)))
}
