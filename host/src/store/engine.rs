//! The engine's rows: jobs, executions, attempts and execution logs, and what the scheduler
//! and worker write.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::writes::ExecutionWrite;
use crate::domain::{
    AttemptStatus, CatchupPolicy, EndpointType, ExecutionStatus, JobStatus, OverlapPolicy, Trigger, TriggerReason,
};
use crate::ids::{AttemptId, ExecutionId, JobId, LogId};

/// The columns a new job is written with, in the order both backends' inserts give them.
pub const JOB_WRITE_COLUMNS: &str =
    "job_id, endpoint, endpoint_type, trigger_type, status, version, previous_version_id, idempotency_key, input, \
     run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at, cron_next_run_at, created_at, \
     endpoint_version, trace_parent, paused_at, overlap_policy, catchup_policy, catchup_window_sec, sla_ms, \
     on_failure, schedule_plugin, schedule_plugin_version, schedule_spec, cron_jitter_ms, \
     expires_at, on_success";

pub const JOB_COLUMNS: &str =
    "job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id, \
     replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at, \
     cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at, \
     overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version, \
     schedule_spec, cron_jitter_ms, expires_at, on_success";
pub const EXECUTION_COLUMNS: &str =
    "execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input, \
     output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at, \
     lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at, \
     on_success, concurrency_key, concurrency_limit";
pub const ATTEMPT_COLUMNS: &str =
    "attempt_id, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at";
pub const LOG_COLUMNS: &str = "log_id, execution_id, attempt_number, level, message, logged_at";

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Job {
    pub job_id: JobId,
    pub endpoint: String,
    /// The endpoint version the job was created against: its executions are delivered with
    /// it, whatever later updates change (None only for rows older than versioning).
    pub endpoint_version: Option<i32>,
    pub endpoint_type: EndpointType,
    pub trigger_type: Trigger,
    pub status: JobStatus,
    pub version: i32,
    pub previous_version_id: Option<JobId>,
    pub replaced_by_id: Option<JobId>,
    pub idempotency_key: Option<String>,
    #[sqlx(json(nullable))]
    pub input: Option<Value>,
    pub run_at: Option<DateTime<Utc>>,
    pub cron_expression: Option<String>,
    pub cron_timezone: Option<String>,
    pub cron_starts_at: Option<DateTime<Utc>>,
    pub cron_ends_at: Option<DateTime<Utc>>,
    pub cron_next_run_at: Option<DateTime<Utc>>,
    /// The newest materialized tick; with lookahead it may still be ahead of now.
    pub cron_last_tick_at: Option<DateTime<Utc>>,
    /// The tick materialized before `cron_last_tick_at`.
    pub cron_prev_tick_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
    /// The W3C trace context of the request that created this version (`crate::trace`).
    pub trace_parent: Option<String>,
    /// Set while a CRON job is paused (it makes no ticks; `cron_next_run_at` is cleared).
    pub paused_at: Option<DateTime<Utc>>,
    pub overlap_policy: OverlapPolicy,
    pub catchup_policy: CatchupPolicy,
    /// How late a tick may be and still be made (None: no limit; 60 s under `none`).
    pub catchup_window_sec: Option<i32>,
    /// Its executions should start within this many milliseconds of their time.
    pub sla_ms: Option<i32>,
    /// The endpoint told of its failed executions, in place of its endpoint's `on_failure`.
    pub on_failure: Option<String>,
    /// A CRON job whose ticks a schedule plugin computes (in place of `cron_expression`), the
    /// version it is pinned to, and the spec passed to it.
    pub schedule_plugin: Option<String>,
    pub schedule_plugin_version: Option<i32>,
    #[sqlx(json(nullable))]
    pub schedule_spec: Option<Value>,
    /// Each tick fires up to this many milliseconds after its time (`scheduler::jitter`).
    pub cron_jitter_ms: Option<i32>,
    /// A one-shot job's execution not started by then fails unsent (DEADLINE_EXCEEDED).
    pub expires_at: Option<DateTime<Utc>>,
    /// The endpoint told of each of its executions' successes (None: nobody).
    #[sqlx(default)]
    pub on_success: Option<String>,
}

impl Job {
    /// The schedule plugin of a CRON job scheduled by one, pinned or not.
    pub fn schedule_ref(&self) -> Option<crate::domain::PluginRef> {
        let name = self.schedule_plugin.clone()?;
        Some(crate::domain::PluginRef { name, version: self.schedule_plugin_version })
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Execution {
    pub execution_id: ExecutionId,
    pub job_id: JobId,
    pub endpoint: String,
    /// Its job's endpoint version (None: the endpoint's newest, for rows older than versioning).
    pub endpoint_version: Option<i32>,
    pub endpoint_type: EndpointType,
    pub idempotency_key: Option<String>,
    pub status: ExecutionStatus,
    #[sqlx(json(nullable))]
    pub input: Option<Value>,
    #[sqlx(json(nullable))]
    pub output: Option<Value>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub worker_id: Option<String>,
    pub run_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i32>,
    pub created_at: DateTime<Utc>,
    /// While RUNNING: until when its worker holds it. Past it, the reclaimer retries it.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// Its job's trace context: each attempt's span is a child of it.
    pub trace_parent: Option<String>,
    /// The failed or cancelled execution this one retries (`POST /executions/{id}/retry`).
    pub retry_of: Option<ExecutionId>,
    /// When it was meant to fire (its first `run_at`; None for rows older than the column).
    pub scheduled_at: Option<DateTime<Utc>>,
    /// When a worker first claimed it: its first attempt's start.
    pub claimed_at: Option<DateTime<Utc>>,
    /// Its job's SLA: it should start within this many milliseconds of `scheduled_at`.
    pub sla_ms: Option<i32>,
    /// Why it was made, where that was not its job's own time (see [`Execution::reason`]).
    #[sqlx(default)]
    pub trigger_reason: Option<TriggerReason>,
    /// Its job's `expires_at`: not started by then, it fails unsent.
    #[sqlx(default)]
    pub expires_at: Option<DateTime<Utc>>,
    /// When an abort of its delivery in flight was asked for (`cancel?running=abort`). Read
    /// by the API's reads only (the worker learns of aborts by [`super::Executions::executions_aborting`]).
    #[sqlx(default)]
    pub abort_requested_at: Option<DateTime<Utc>>,
    /// Its job's `on_success`: the endpoint told of its success (the worker keeps the
    /// receiver's headers for it).
    #[sqlx(default)]
    pub on_success: Option<String>,
    /// Its endpoint's concurrency key as rendered from its input, and the key's
    /// `max_in_flight` when it was made (`flow::concurrency`; None: no key).
    #[sqlx(default)]
    pub concurrency_key: Option<String>,
    #[sqlx(default)]
    pub concurrency_limit: Option<i32>,
}

impl Execution {
    /// Why it was made: as recorded, or (NULL, as the inserts of new jobs and ticks leave it)
    /// a retry when it names the execution it retries, else its job's own time.
    pub fn reason(&self) -> TriggerReason {
        match (self.trigger_reason, &self.retry_of) {
            (Some(reason), _) => reason,
            (None, Some(_)) => TriggerReason::Retry,
            (None, None) => TriggerReason::Scheduled,
        }
    }

    /// How late its first attempt started, in milliseconds (None until it is claimed; rows
    /// older than `scheduled_at` count from `run_at`).
    pub fn lateness_ms(&self) -> Option<i64> {
        lateness_ms(self.scheduled_at, self.run_at, self.claimed_at)
    }

    /// When it was due: its `scheduled_at`, or for rows older than that column its creation
    /// (its `run_at` moves with each retry).
    pub fn due_at(&self) -> DateTime<Utc> {
        self.scheduled_at.unwrap_or(self.created_at)
    }

    /// Why its first attempt may not start at `at`: its job's `expires_at` has passed. (The
    /// claim counts the attempt it makes: the first is attempt 1.)
    pub fn expired_unstarted(&self, at: DateTime<Utc>) -> Option<String> {
        let expires = self.expires_at.filter(|expires| self.attempt_count <= 1 && at > *expires)?;
        Some(format!("Not attempted: its job expired at {} (expires_at) before it could start.", expires.to_rfc3339()))
    }

    /// Whether its first attempt started within its job's SLA (None: no SLA, or not started).
    pub fn sla_met(&self) -> Option<bool> {
        Some(self.lateness_ms()? <= i64::from(self.sla_ms?))
    }
}

/// One execution as the dashboard's overview counts it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActivitySample {
    pub endpoint: String,
    pub status: ExecutionStatus,
    pub run_at: DateTime<Utc>,
    pub scheduled_at: Option<DateTime<Utc>>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl ActivitySample {
    /// How late its first attempt started, in milliseconds (as [`Execution::lateness_ms`]).
    pub fn lateness_ms(&self) -> Option<i64> {
        lateness_ms(self.scheduled_at, self.run_at, self.claimed_at)
    }
}

/// How late a first attempt claimed at `claimed_at` started, in milliseconds, counting from
/// `scheduled_at` (from `run_at` for rows older than that column); None until claimed.
fn lateness_ms(
    scheduled_at: Option<DateTime<Utc>>,
    run_at: DateTime<Utc>,
    claimed_at: Option<DateTime<Utc>>,
) -> Option<i64> {
    let scheduled = scheduled_at.unwrap_or(run_at);
    claimed_at.map(|claimed| (claimed - scheduled).num_milliseconds().max(0))
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Attempt {
    pub attempt_id: AttemptId,
    pub execution_id: ExecutionId,
    pub attempt_number: i32,
    pub status: AttemptStatus,
    pub started_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i32>,
    #[sqlx(json(nullable))]
    pub output: Option<Value>,
    #[sqlx(json(nullable))]
    pub error: Option<Value>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ExecutionLog {
    pub log_id: LogId,
    pub execution_id: ExecutionId,
    pub attempt_number: i32,
    pub level: String,
    pub message: String,
    pub logged_at: DateTime<Utc>,
}

/// Filters of `GET /executions` and `POST /executions/replay`; every one that is set applies.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    pub status: Option<ExecutionStatus>,
    pub endpoint: Option<String>,
    pub job_id: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before.
    pub created_before: Option<DateTime<Utc>>,
    /// Of this tenant's endpoints (None: of every tenant's).
    pub tenant: Option<String>,
}

/// Filters of `GET /jobs`.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Of this tenant's endpoints (None: of every tenant's).
    pub tenant: Option<String>,
    pub endpoint: Option<String>,
    pub status: Option<JobStatus>,
    pub trigger_type: Option<Trigger>,
}

/// One log line of an attempt.
#[derive(Debug, Clone)]
pub struct LogWrite {
    pub level: &'static str,
    pub message: String,
    pub logged_at: DateTime<Utc>,
}

/// The outcome of one attempt, written in one transaction: the execution's new state (only
/// if it is still RUNNING under this attempt number: the fence), the attempt, its logs.
#[derive(Debug, Clone)]
pub struct AttemptFinish {
    pub execution_id: ExecutionId,
    pub attempt_number: i32,
    /// SUCCESS, RETRYING, FAILED or CANCELLED; PENDING for an execution with a concurrency key
    /// that will retry without holding its key (`flow::concurrency`, unordered).
    pub execution_status: ExecutionStatus,
    pub attempt_status: AttemptStatus,
    pub output: Option<Value>,
    pub error: Option<Value>,
    pub started_at: DateTime<Utc>,
    pub completed_at: DateTime<Utc>,
    pub duration_ms: i32,
    /// When the next attempt may run (RETRYING only).
    pub retry_at: Option<DateTime<Utc>>,
    pub logs: Vec<LogWrite>,
    /// The execution's endpoint, and what the outcome says about its receiver for the
    /// endpoint's circuit breaker (None: nothing, as when the delivery was never sent).
    pub endpoint: String,
    pub health: Option<crate::flow::Health>,
    /// The execution's concurrency key (None: it has none).
    pub concurrency_key: Option<String>,
}

impl AttemptFinish {
    /// The key whose place this outcome gives up: its own, unless it stays RETRYING (a
    /// `fifo` key's execution keeps its place through its backoff).
    pub fn key_freed(&self) -> Option<super::KeyRef> {
        let key = self.concurrency_key.as_ref()?;
        (self.execution_status != ExecutionStatus::Retrying)
            .then(|| super::KeyRef { endpoint: self.endpoint.clone(), key: key.clone() })
    }
}

/// What [`crate::store::Claims::execution_finish_many`] wrote.
#[derive(Debug, Default)]
pub struct FinishedAttempts {
    /// Per finish, in order: whether it was written (false: the fence held).
    pub written: Vec<bool>,
    /// The circuit breakers' transitions the written outcomes made, committed with them.
    pub circuit_changes: Vec<CircuitChange>,
}

/// One transition of an endpoint's circuit breaker.
#[derive(Debug, Clone, PartialEq)]
pub struct CircuitChange {
    pub endpoint: String,
    pub transition: crate::flow::Transition,
    /// The endpoint's consecutive failures after it.
    pub failures: i32,
}

impl AttemptFinish {
    /// Clean everything this outcome carries from a peer (see [`super::storable`]) so the
    /// database accepts it; what was cut is flagged in the output, the error, or a last log
    /// line. Idempotent.
    pub fn make_storable(&mut self) {
        for (document, flag) in [(&mut self.output, "output_truncated"), (&mut self.error, "message_truncated")] {
            if let Some(document) = document {
                if super::storable::value(document) {
                    if let Value::Object(map) = document {
                        map.insert(flag.to_owned(), Value::Bool(true));
                    }
                }
            }
        }
        if let Some(message) = self.health.as_mut().and_then(crate::flow::Health::error_mut) {
            let (cleaned, _) = super::storable::text(message, super::storable::MAX_LOG_LINE_BYTES);
            *message = cleaned.into_owned();
        }
        for log in &mut self.logs {
            let (cleaned, cut) = super::storable::text(&log.message, super::storable::MAX_LOG_LINE_BYTES);
            if cut {
                log.message = format!("{cleaned} [truncated]");
            } else if let std::borrow::Cow::Owned(cleaned) = cleaned {
                log.message = cleaned;
            }
        }
        let max = super::storable::MAX_LOG_LINES;
        if self.logs.len() > max {
            let dropped = self.logs.len() - (max - 1);
            let last = self.logs.last().map_or(self.completed_at, |l| l.logged_at);
            self.logs.truncate(max - 1);
            self.logs.push(LogWrite {
                level: "WARN",
                message: format!("{dropped} more log lines of this attempt were not kept (at most {max} are)."),
                logged_at: last,
            });
        }
    }

    /// This outcome with nothing from the peer: the status and timing stay, the output and
    /// logs go, and the error says why. Written when the full row cannot be, so the
    /// execution still leaves RUNNING with its true status.
    pub fn without_payload(&self, why: &str) -> Self {
        let error = serde_json::json!({
            "type": crate::domain::AttemptErrorType::ResultUnstorable,
            "message": format!("The attempt's result could not be stored ({why}); its status is kept."),
            "retryable": self.execution_status == ExecutionStatus::Retrying,
        });
        Self {
            output: self.output.as_ref().map(|_| serde_json::json!({ "error": error.clone() })),
            error: Some(error),
            logs: Vec::new(),
            health: self.health.clone().map(|mut health| {
                if let Some(message) = health.error_mut() {
                    *message = "(the message could not be stored)".to_owned();
                }
                health
            }),
            ..self.clone()
        }
    }
}

/// How long before its time an execution may be made ready: the promoter makes it QUEUED,
/// and a worker claims it, up to this long ahead, and the worker starts it at its time. The
/// database's writes on the way (the promotion, the claim) are then off the path from an
/// execution's time to its start: on two cores saturated by a backlog, a claim made at a
/// cron tick's time started it 53-222 ms late at p99 (the soak, docs/benchmarks.md), where a
/// worker's timer is a millisecond late.
pub const READY_AHEAD: chrono::Duration = chrono::Duration::milliseconds(250);

/// Whether `table` is the queue's own table: `executions`, or where history is partitioned
/// apart (`store::partitions`), `executions_live`. It is vacuumed on its own and often.
pub fn is_queue_table(table: &str) -> bool {
    table == "executions" || table == "executions_live"
}

/// The claim's first CTE on every backend: each endpoint with executions waiting to be claimed
/// (QUEUED or RETRYING), by a loose index scan of idx_executions_claim_endpoint (one probe per
/// endpoint, however long its queue), ending with a NULL row.
pub(super) const QUEUED_ENDPOINTS: &str = "queued(endpoint) AS (
         SELECT (SELECT endpoint FROM executions
                 WHERE status IN ('QUEUED', 'RETRYING')
                 ORDER BY endpoint
                 LIMIT 1)
         UNION ALL
         SELECT (SELECT e.endpoint FROM executions e
                 WHERE e.status IN ('QUEUED', 'RETRYING') AND e.endpoint > q.endpoint
                 ORDER BY e.endpoint
                 LIMIT 1)
         FROM queued q
         WHERE q.endpoint IS NOT NULL
     )";

/// A claim: up to `limit` executions for `worker_id` whose `run_at` is at most `due_by` (now,
/// or up to [`READY_AHEAD`] later: the worker then starts each at its `run_at`), each leased
/// for `lease` from the database's clock.
#[derive(Debug, Clone)]
pub struct ClaimParams {
    pub worker_id: String,
    pub now: DateTime<Utc>,
    pub due_by: DateTime<Utc>,
    pub limit: i64,
    pub lease: std::time::Duration,
    /// How many executions of each endpoint this claim may take (see `worker::fairness`).
    pub shares: EndpointShares,
}

/// How many executions of each endpoint a claim may take: an endpoint may hold at most
/// `ceiling` of the worker's slots, or its `max_concurrency` (read by the claim from the
/// endpoint's current row) when lower, less the slots it `held` already.
#[derive(Debug, Clone, Default)]
pub struct EndpointShares {
    pub held: Vec<(String, i32)>,
    pub ceiling: i32,
}

impl EndpointShares {
    /// What a claim may take of `endpoint`, given its `max_concurrency`.
    pub fn allowance(&self, endpoint: &str, max_concurrency: Option<i32>) -> i32 {
        let held = self.held.iter().find(|(e, _)| e == endpoint).map_or(0, |(_, h)| *h);
        max_concurrency.map_or(self.ceiling, |m| m.min(self.ceiling)) - held
    }
}

/// Keep the lease of an execution a worker holds until at least `for_ms` from now (by the
/// database's clock; never shortened), if it is still RUNNING under `attempt`.
#[derive(Debug, Clone)]
pub struct LeaseExtend {
    pub execution_id: ExecutionId,
    pub attempt: i32,
    pub for_ms: i64,
}

/// A cron tick to record: advance the job from `tick` to `next` (compare-and-set on `tick`)
/// and create the tick's execution.
#[derive(Debug, Clone)]
pub struct CronAdvance {
    pub job_id: JobId,
    /// The job's next tick as read: the compare-and-set's expected value.
    pub tick: DateTime<Utc>,
    /// The tick recorded as the job's last: `tick`, or the later one its catch-up policy made
    /// (or skipped to).
    pub last: DateTime<Utc>,
    /// None when the schedule has no tick left (past `ends_at`).
    pub next: Option<DateTime<Utc>>,
    pub execution: Option<ExecutionWrite>,
}

/// Counts and durations behind `GET /jobs/{id}/status`.
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    pub pending: i64,
    pub queued: i64,
    pub running: i64,
    pub retrying: i64,
    /// Executions completed in the window, by outcome.
    pub succeeded: i64,
    pub failed: i64,
    /// Their mean duration.
    pub avg_duration_ms: Option<f64>,
    /// Durations of the newest [`JobStats::SAMPLE`] of them, for percentiles: however busy
    /// the job, the status reads a bounded number of rows.
    pub recent_durations: Vec<i32>,
    /// Lateness (ms from scheduled to claimed) of the newest [`JobStats::SAMPLE`] executions
    /// claimed in the window, for the SLA ratio.
    pub recent_lateness_ms: Vec<i64>,
}

impl JobStats {
    pub const SAMPLE: i64 = 10_000;
}

/// An installed plugin version, without its bytes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PluginRecord {
    pub name: String,
    pub version: i32,
    pub sha256: String,
    pub world: String,
    /// The grants as installed: a list of `scheme://host[:port]` patterns.
    #[sqlx(json)]
    pub grants: Value,
    #[sqlx(json)]
    pub limits: Value,
    pub created_at: DateTime<Utc>,
    pub size_bytes: i64,
}

/// A plugin version to install.
#[derive(Debug, Clone)]
pub struct PluginWrite {
    pub name: String,
    pub sha256: String,
    pub bytes: Vec<u8>,
    pub world: String,
    pub grants: Value,
    pub limits: Value,
}

/// `SELECT {columns} FROM executions WHERE {conditions}` in (created_at, execution_id) order,
/// `direction` ASC or DESC, at most `limit` rows (a parameter or a literal), with `columns`
/// naming created_at and execution_id.
///
/// On PostgreSQL the indexes that list executions by creation and by job leave RUNNING rows out
/// (migration 0065: a claim then writes two index entries instead of four), and the planner
/// uses such a partial index only when the query itself says `status <> 'RUNNING'`. So the
/// rows that are not RUNNING and those that are (idx_executions_running: at most the running
/// workers' slots) are asked separately and merged. SQLite's indexes are whole; the same
/// statement reads them.
pub(crate) fn settled_or_running(columns: &str, conditions: &[String], direction: &str, limit: &str) -> String {
    let matching = if conditions.is_empty() { "1 = 1".to_owned() } else { conditions.join(" AND ") };
    let part = |status: &str| {
        format!(
            "SELECT * FROM (SELECT {columns} FROM executions WHERE {matching} AND {status}
                            ORDER BY created_at {direction}, execution_id {direction} LIMIT {limit}) AS part"
        )
    };
    format!(
        "SELECT * FROM ({settled} UNION ALL {running}) AS merged
         ORDER BY created_at {direction}, execution_id {direction} LIMIT {limit}",
        settled = part("status <> 'RUNNING'"),
        running = part("status = 'RUNNING'"),
    )
}

/// The SQL conditions of `filter`, numbered from `$1` in the order its values are bound (status,
/// endpoint, job, created after, created before, the tenant's pattern); and the next free
/// parameter number.
pub(crate) fn execution_conditions(filter: &ExecutionFilter) -> (Vec<String>, usize) {
    let mut conditions = Vec::new();
    let mut next = 1;
    let mut add = |condition: &str| {
        conditions.push(condition.replace('?', &format!("${next}")));
        next += 1;
    };
    if filter.status.is_some() {
        add("status = ?");
    }
    if filter.endpoint.is_some() {
        add("endpoint = ?");
    }
    if filter.job_id.is_some() {
        add("job_id = ?");
    }
    if filter.created_after.is_some() {
        add("created_at >= ?");
    }
    if filter.created_before.is_some() {
        add("created_at < ?");
    }
    if let Some(tenant) = &filter.tenant {
        match super::sql::pages::tenant_condition("endpoint", tenant) {
            (condition, Some(_)) => add(&condition),
            (condition, None) => conditions.push(condition),
        }
    }
    (conditions, next)
}
