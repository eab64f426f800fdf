//! Prometheus metrics, served at `/metrics` by every role (on the API's address, or on
//! `TE_HEALTH_ADDR` for worker- and scheduler-only processes).
//!
//! Recorded through the `metrics` facade and rendered by `metrics-exporter-prometheus` (no
//! listener of its own: the health router serves the text). Label values are bounded: endpoint
//! names and types, statuses, error types, loop names and plugin names, all fixed by
//! registration or by the code; never an id. Gauges that describe the database (queue depth,
//! pool use) are read when scraped, so they are always current; every process reports the
//! whole queue, so aggregate them with `max`, not `sum`.
//!
//! docs/operations.md lists every metric and example alert rules.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{counter, gauge, histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::ExecutionStatus;
use crate::store::Store;

pub const JOBS_CREATED: &str = "taskexec_jobs_created_total";
pub const EXECUTIONS_FINISHED: &str = "taskexec_executions_finished_total";
pub const ATTEMPTS: &str = "taskexec_attempts_total";
pub const DELIVERY_SECONDS: &str = "taskexec_delivery_duration_seconds";
pub const FIRE_LATENESS_SECONDS: &str = "taskexec_fire_lateness_seconds";
pub const EXECUTIONS: &str = "taskexec_executions";
pub const WORKER_SLOTS_BUSY: &str = "taskexec_worker_slots_busy";
pub const WORKER_SLOTS_CAPACITY: &str = "taskexec_worker_slots_capacity";
pub const LOOP_SECONDS: &str = "taskexec_scheduler_loop_duration_seconds";
pub const LOOP_ERRORS: &str = "taskexec_scheduler_loop_errors_total";
pub const RESULT_WRITE_RETRIES: &str = "taskexec_result_write_retries_total";
pub const PLUGIN_CALLS: &str = "taskexec_plugin_calls_total";
pub const PLUGIN_TRAPS: &str = "taskexec_plugin_traps_total";
pub const PLUGIN_REUSED: &str = "taskexec_plugin_reused_instances_total";
pub const PLUGIN_PARKED: &str = "taskexec_plugin_parked_instances";
pub const PLUGIN_INSTANTIATE_SECONDS: &str = "taskexec_plugin_instantiate_seconds";
pub const DB_POOL_CONNECTIONS: &str = "taskexec_db_pool_connections";
pub const PURGED: &str = "taskexec_retention_purged_total";
pub const CIRCUIT_STATE: &str = "taskexec_endpoint_circuit_state";
pub const CIRCUIT_TRANSITIONS: &str = "taskexec_endpoint_circuit_transitions_total";
pub const PLUGIN_MEMORY_WAIT_SECONDS: &str = "taskexec_plugin_memory_wait_seconds";
pub const CONNECTIONS_REFUSED: &str = "taskexec_http_connections_refused_total";

/// Buckets for durations: from 1 ms to 5 minutes (the longest a delivery may take).
const SECONDS_BUCKETS: [f64; 16] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Install the process's recorder (once; later calls return the same handle), and the thread
/// that keeps it.
///
/// The recorder holds every histogram sample in memory until it is folded into the buckets,
/// which a scrape does, or an upkeep: `install_recorder` leaves the upkeep to its caller. Without
/// it, a process nobody scrapes (a worker without `TE_HEALTH_ADDR` has no `/metrics` at all) kept
/// each delivery's samples for ever: its RSS grew ~40 bytes per execution, 44 → 169 MiB over
/// 3,500,000 executions of the soak (docs/benchmarks.md).
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS_BUCKETS)
            .expect("the buckets are not empty")
            .install_recorder()
            .expect("the metrics recorder is installed once per process");
        describe();
        let kept = handle.clone();
        // A thread of its own: the recorder is installed before (and outlives) any runtime.
        std::thread::Builder::new()
            .name("metrics-upkeep".to_owned())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_EVERY);
                kept.run_upkeep();
            })
            .expect("the metrics upkeep thread starts");
        handle
    })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(JOBS_CREATED, "Jobs created, by trigger and endpoint type.");
    describe_counter!(EXECUTIONS_FINISHED, "Executions that reached SUCCESS or FAILED, by endpoint.");
    describe_counter!(ATTEMPTS, "Attempts recorded, by outcome and error type.");
    describe_histogram!(DELIVERY_SECONDS, Unit::Seconds, "Time from sending a delivery to its answer.");
    describe_histogram!(
        FIRE_LATENESS_SECONDS,
        Unit::Seconds,
        "Time from an execution's run_at to its request being sent."
    );
    describe_gauge!(EXECUTIONS, "Executions waiting or running, by status (the whole database).");
    describe_gauge!(WORKER_SLOTS_BUSY, "Worker slots holding an attempt.");
    describe_gauge!(WORKER_SLOTS_CAPACITY, "Worker slots (TE_WORKER_MAX_CONCURRENT).");
    describe_histogram!(LOOP_SECONDS, Unit::Seconds, "Time one round of a scheduler loop took.");
    describe_counter!(LOOP_ERRORS, "Rounds of a scheduler loop that failed.");
    describe_counter!(RESULT_WRITE_RETRIES, "Attempt-result batch writes retried after a transient database error.");
    describe_counter!(PLUGIN_CALLS, "Plugin deliveries, by plugin.");
    describe_counter!(PLUGIN_TRAPS, "Plugin calls that trapped or ran out of time, by plugin.");
    describe_gauge!(PLUGIN_PARKED, "Plugin instances kept for their endpoint's next delivery (calls_per_instance).");
    describe_counter!(
        PLUGIN_REUSED,
        "Plugin deliveries made by an instance an earlier delivery made (calls_per_instance), by plugin."
    );
    describe_histogram!(PLUGIN_INSTANTIATE_SECONDS, Unit::Seconds, "Time to instantiate a plugin for a call.");
    describe_gauge!(DB_POOL_CONNECTIONS, "Database pool connections, by state (idle or busy).");
    describe_gauge!(
        CIRCUIT_STATE,
        "Endpoints whose circuit is not closed, by endpoint and state (open, half_open, disabled): 1 while it holds, 0 once closed again."
    );
    describe_counter!(
        CIRCUIT_TRANSITIONS,
        "Circuit-breaker changes this process made, by endpoint and the state entered (open, closed, disabled)."
    );
    describe_histogram!(
        PLUGIN_MEMORY_WAIT_SECONDS,
        Unit::Seconds,
        "Time plugin calls waited for room in the plugin memory budget (TE_PLUGIN_MEMORY_TOTAL_MB)."
    );
    describe_counter!(
        CONNECTIONS_REFUSED,
        "Connections closed on arrival because their client address held TE_MAX_CONNECTIONS_PER_CLIENT, by reason."
    );
    describe_counter!(PURGED, "Rows deleted by the retention purge (TE_RETENTION), by kind (executions, jobs).");
}

/// The text of `/metrics`: what was recorded, and the database's current figures.
pub async fn render(store: &dyn Store) -> String {
    let Some(handle) = HANDLE.get() else { return String::new() };
    let (size, idle) = store.pool_connections();
    gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(idle as f64);
    gauge!(DB_POOL_CONNECTIONS, "state" => "busy").set((size as usize).saturating_sub(idle) as f64);
    match store.execution_counts(None).await {
        Ok(counts) => {
            for status in
                [ExecutionStatus::Pending, ExecutionStatus::Queued, ExecutionStatus::Running, ExecutionStatus::Retrying]
            {
                let n = counts.iter().find(|(s, _)| *s == status).map_or(0, |(_, n)| *n);
                gauge!(EXECUTIONS, "status" => status.as_str()).set(n as f64);
            }
        }
        Err(error) => tracing::debug!(%error, "Could not count executions for /metrics."),
    }
    circuits(store).await;
    handle.render()
}

/// The (endpoint, state) pairs last reported as 1, so a circuit that closed is reported as 0.
static CIRCUITS_SHOWN: std::sync::Mutex<Vec<(String, &'static str)>> = std::sync::Mutex::new(Vec::new());

/// Endpoints whose circuit is open or half-open, or that are disabled, as the database has them.
async fn circuits(store: &dyn Store) {
    let endpoints = match store.endpoint_circuits_not_closed().await {
        Ok(endpoints) => endpoints,
        Err(error) => return tracing::debug!(%error, "Could not read circuit states for /metrics."),
    };
    let now = crate::store::now();
    let current: Vec<(String, &'static str)> = endpoints
        .into_iter()
        .map(|e| {
            let state = if e.disabled_at.is_some() { "disabled" } else { e.circuit().phase(now).as_str() };
            (e.name, state)
        })
        .collect();
    let mut shown = CIRCUITS_SHOWN.lock().expect("circuit gauge lock");
    for (endpoint, state) in shown.iter().filter(|pair| !current.contains(pair)) {
        gauge!(CIRCUIT_STATE, endpoint_labels(endpoint, state).to_vec()).set(0.0);
    }
    for (endpoint, state) in &current {
        gauge!(CIRCUIT_STATE, endpoint_labels(endpoint, state).to_vec()).set(1.0);
    }
    *shown = current;
}

/// The labels of an endpoint's series: its `tenant` and its `endpoint` name within the tenant
/// (from its stored name, `domain::tenant`), and `state`.
fn endpoint_labels(stored: &str, state: &'static str) -> [metrics::Label; 3] {
    [
        metrics::Label::new("tenant", crate::domain::tenant::tenant_of(stored).to_owned()),
        metrics::Label::new("endpoint", crate::domain::tenant::own_name(stored).to_owned()),
        metrics::Label::new("state", state),
    ]
}

/// A circuit-breaker change on `endpoint` (its stored name), into state `to`.
pub fn circuit_transition(endpoint: &str, to: &'static str) {
    counter!(CIRCUIT_TRANSITIONS, endpoint_labels(endpoint, to).to_vec()).increment(1);
}

/// A job made for `endpoint` (its stored name).
pub fn job_created(trigger: &'static str, endpoint_type: &'static str, endpoint: &str) {
    let tenant = crate::domain::tenant::tenant_of(endpoint).to_owned();
    counter!(JOBS_CREATED, "trigger" => trigger, "endpoint_type" => endpoint_type, "tenant" => tenant).increment(1);
}

/// An execution of `endpoint` (its stored name) finished.
pub fn execution_finished(status: &'static str, endpoint_type: &'static str, endpoint: &str) {
    let (tenant, name) = (crate::domain::tenant::tenant_of(endpoint), crate::domain::tenant::own_name(endpoint));
    counter!(EXECUTIONS_FINISHED, "status" => status, "endpoint_type" => endpoint_type,
        "tenant" => tenant.to_owned(), "endpoint" => name.to_owned())
    .increment(1);
}

pub fn attempt(outcome: &'static str, error_type: &str) {
    counter!(ATTEMPTS, "outcome" => outcome, "error_type" => error_type.to_owned()).increment(1);
}

pub fn delivery(endpoint_type: &'static str, took: Duration) {
    histogram!(DELIVERY_SECONDS, "endpoint_type" => endpoint_type).record(took.as_secs_f64());
}

pub fn fire_lateness(late: Duration) {
    histogram!(FIRE_LATENESS_SECONDS).record(late.as_secs_f64());
}

pub fn worker_slots_capacity(capacity: usize) {
    gauge!(WORKER_SLOTS_CAPACITY).set(capacity as f64);
}

pub fn worker_slot_taken() {
    gauge!(WORKER_SLOTS_BUSY).increment(1.0);
}

pub fn worker_slot_freed() {
    gauge!(WORKER_SLOTS_BUSY).decrement(1.0);
}

/// One round of scheduler loop `name`, and whether it failed.
pub fn loop_round(name: &'static str, took: Duration, failed: bool) {
    histogram!(LOOP_SECONDS, "loop" => name).record(took.as_secs_f64());
    if failed {
        counter!(LOOP_ERRORS, "loop" => name).increment(1);
    }
}

pub fn purged(kind: &'static str, rows: usize) {
    counter!(PURGED, "kind" => kind).increment(rows as u64);
}

pub fn result_write_retried() {
    counter!(RESULT_WRITE_RETRIES).increment(1);
}

pub fn plugin_call(plugin: &str, trapped: bool, reused: bool) {
    counter!(PLUGIN_CALLS, "plugin" => plugin.to_owned()).increment(1);
    if trapped {
        counter!(PLUGIN_TRAPS, "plugin" => plugin.to_owned()).increment(1);
    }
    if reused {
        counter!(PLUGIN_REUSED, "plugin" => plugin.to_owned()).increment(1);
    }
}

pub fn plugin_instances_parked(parked: usize) {
    gauge!(PLUGIN_PARKED).set(parked as f64);
}

pub fn plugin_instantiated(took: Duration) {
    histogram!(PLUGIN_INSTANTIATE_SECONDS).record(took.as_secs_f64());
}

/// A plugin call waited `took` for room in the plugin memory budget.
pub fn plugin_memory_waited(took: Duration) {
    histogram!(PLUGIN_MEMORY_WAIT_SECONDS).record(took.as_secs_f64());
}
