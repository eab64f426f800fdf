//! What is written for a new job and for a new execution, built in one place each: a new job's
//! defaults, and an execution that is its job's first fire.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::engine::Job;
use super::resources::Endpoint;
use crate::domain::{CatchupPolicy, EndpointType, ExecutionStatus, JobStatus, OverlapPolicy, Trigger, TriggerReason};
use crate::ids::{ExecutionId, JobId};

/// A new job (a first version, or a cron job's next version).
#[derive(Debug, Clone)]
pub struct JobWrite {
    pub job_id: JobId,
    pub endpoint: String,
    pub endpoint_version: i32,
    pub endpoint_type: EndpointType,
    pub trigger_type: Trigger,
    pub version: i32,
    pub previous_version_id: Option<JobId>,
    pub idempotency_key: Option<String>,
    pub input: Value,
    pub run_at: Option<DateTime<Utc>>,
    pub cron_expression: Option<String>,
    pub cron_timezone: Option<String>,
    pub cron_starts_at: Option<DateTime<Utc>>,
    pub cron_ends_at: Option<DateTime<Utc>>,
    pub cron_next_run_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub trace_parent: Option<String>,
    pub paused_at: Option<DateTime<Utc>>,
    pub overlap_policy: OverlapPolicy,
    pub catchup_policy: CatchupPolicy,
    pub catchup_window_sec: Option<i32>,
    pub sla_ms: Option<i32>,
    pub on_failure: Option<String>,
    /// A schedule plugin in place of `cron_expression`, and its spec.
    pub schedule: Option<crate::domain::PluginRef>,
    pub schedule_spec: Option<Value>,
    /// A CRON job's ticks each fire up to this many milliseconds after their time.
    pub cron_jitter_ms: Option<i32>,
    /// A one-shot job's execution not started by then fails unsent.
    pub expires_at: Option<DateTime<Utc>>,
    /// The endpoint told of each success.
    pub on_success: Option<String>,
}

impl JobWrite {
    /// The job as its row reads back once written: ACTIVE, nothing replaced, retired or
    /// ticked yet, its times at the precision the store keeps. What a create answers without
    /// reading its row back (`RETURNING` every column of 1,000 jobs, and decoding them, was a
    /// sixth of the API's time for a batch; `perf`, 2026-11-27).
    pub fn as_written(&self) -> Job {
        use super::time::stored;
        Job {
            job_id: self.job_id.clone(),
            endpoint: self.endpoint.clone(),
            endpoint_version: Some(self.endpoint_version),
            endpoint_type: self.endpoint_type,
            trigger_type: self.trigger_type,
            status: JobStatus::Active,
            version: self.version,
            previous_version_id: self.previous_version_id.clone(),
            replaced_by_id: None,
            idempotency_key: self.idempotency_key.clone(),
            input: Some(self.input.clone()),
            run_at: self.run_at.map(stored),
            cron_expression: self.cron_expression.clone(),
            cron_timezone: self.cron_timezone.clone(),
            cron_starts_at: self.cron_starts_at.map(stored),
            cron_ends_at: self.cron_ends_at.map(stored),
            cron_next_run_at: self.cron_next_run_at.map(stored),
            cron_last_tick_at: None,
            cron_prev_tick_at: None,
            created_at: stored(self.created_at),
            retired_at: None,
            trace_parent: self.trace_parent.clone(),
            paused_at: self.paused_at.map(stored),
            overlap_policy: self.overlap_policy,
            catchup_policy: self.catchup_policy,
            catchup_window_sec: self.catchup_window_sec,
            sla_ms: self.sla_ms,
            on_failure: self.on_failure.clone(),
            schedule_plugin: self.schedule.as_ref().map(|p| p.name.clone()),
            schedule_plugin_version: self.schedule.as_ref().and_then(|p| p.version),
            schedule_spec: self.schedule_spec.clone(),
            cron_jitter_ms: self.cron_jitter_ms,
            expires_at: self.expires_at,
            on_success: self.on_success.clone(),
        }
    }
}

/// A new execution.
#[derive(Debug, Clone)]
pub struct ExecutionWrite {
    pub execution_id: ExecutionId,
    pub job_id: JobId,
    pub endpoint: String,
    pub endpoint_version: Option<i32>,
    pub endpoint_type: EndpointType,
    pub idempotency_key: Option<String>,
    /// PENDING (waits for `run_at`) or QUEUED (claimable now).
    pub status: ExecutionStatus,
    pub input: Value,
    pub max_attempts: i32,
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub trace_parent: Option<String>,
    pub retry_of: Option<ExecutionId>,
    /// A cron tick's job's overlap policy, applied when the tick is due (None: allow).
    pub overlap_policy: Option<OverlapPolicy>,
    /// Its job's SLA in milliseconds. (`scheduled_at` is written as `run_at`.)
    pub sla_ms: Option<i32>,
    /// Why it is made, where that is not its job's own time (None: a one-shot fire or a cron
    /// tick; the batch inserts of those write no reason).
    pub trigger_reason: Option<TriggerReason>,
    /// Its job's `expires_at` (a one-shot job's first execution only).
    pub expires_at: Option<DateTime<Utc>>,
    /// Its job's `on_success`.
    pub on_success: Option<String>,
    /// Its endpoint's concurrency key, rendered from its input, and the key's `max_in_flight`
    /// ([`ExecutionWrite::keyed`]; None: no key).
    pub concurrency_key: Option<String>,
    pub concurrency_limit: Option<i32>,
}

/// A job to create, with its first execution (none for a cron job: the scheduler makes its
/// ticks), as [`crate::store::Jobs::job_insert`] writes them together.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub job: JobWrite,
    pub execution: Option<ExecutionWrite>,
}

impl JobWrite {
    /// A new job's first version: `trigger` on `endpoint` (named, at `endpoint_version`, of
    /// `endpoint_type`), made at `at`, under a new id. Everything else at its default: no
    /// idempotency key, input `{}`, no time or schedule, not paused, overlapping ticks allowed,
    /// every missed tick caught up, no SLA, no failure callback, no trace. Callers set what
    /// their request gave with struct update syntax.
    pub fn new(
        endpoint: &str,
        endpoint_version: i32,
        endpoint_type: EndpointType,
        trigger: Trigger,
        at: DateTime<Utc>,
    ) -> Self {
        Self {
            job_id: JobId::new(),
            endpoint: endpoint.to_owned(),
            endpoint_version,
            endpoint_type,
            trigger_type: trigger,
            version: 1,
            previous_version_id: None,
            idempotency_key: None,
            input: Value::Object(Default::default()),
            run_at: None,
            cron_expression: None,
            cron_timezone: None,
            cron_starts_at: None,
            cron_ends_at: None,
            cron_next_run_at: None,
            created_at: at,
            trace_parent: None,
            paused_at: None,
            overlap_policy: OverlapPolicy::Allow,
            catchup_policy: CatchupPolicy::All,
            catchup_window_sec: None,
            sla_ms: None,
            on_failure: None,
            schedule: None,
            schedule_spec: None,
            cron_jitter_ms: None,
            expires_at: None,
            on_success: None,
        }
    }

    /// [`JobWrite::new`] on `endpoint` as it is now.
    pub fn on(endpoint: &Endpoint, trigger: Trigger, at: DateTime<Utc>) -> Self {
        Self::new(&endpoint.name, endpoint.version, endpoint.endpoint_type, trigger, at)
    }
}

impl ExecutionWrite {
    /// The first execution of `job` (a one-shot job's fire, made with it): its endpoint,
    /// idempotency key, input, trace and SLA, created with it; `status` (PENDING to wait for
    /// `run_at`, QUEUED when claimable now), tried at most `max_attempts` times.
    pub fn first_of(job: &JobWrite, status: ExecutionStatus, run_at: DateTime<Utc>, max_attempts: i32) -> Self {
        Self {
            execution_id: ExecutionId::new(),
            job_id: job.job_id.clone(),
            endpoint: job.endpoint.clone(),
            endpoint_version: Some(job.endpoint_version),
            endpoint_type: job.endpoint_type,
            idempotency_key: job.idempotency_key.clone(),
            status,
            input: job.input.clone(),
            max_attempts,
            run_at,
            created_at: job.created_at,
            trace_parent: job.trace_parent.clone(),
            retry_of: None,
            overlap_policy: None,
            sla_ms: job.sla_ms,
            trigger_reason: None,
            expires_at: job.expires_at,
            on_success: job.on_success.clone(),
            concurrency_key: None,
            concurrency_limit: None,
        }
    }

    /// Under `concurrency`, the concurrency key of the endpoint it is made for
    /// (`flow::concurrency`): its key rendered from its input, and PENDING (its key admits it
    /// when its time has come and the key has room); unchanged without one. An input the key
    /// cannot be made of (checked when a job is created; an endpoint's key set later may name
    /// a field its jobs lack) shares the key named by the template itself.
    pub fn keyed(mut self, concurrency: Option<&crate::flow::Concurrency>) -> Self {
        if let Some(concurrency) = concurrency {
            self.concurrency_key = Some(concurrency.key_of(&self.input).unwrap_or_else(|_| concurrency.key.clone()));
            self.concurrency_limit = Some(concurrency.limit());
            self.status = ExecutionStatus::Pending;
        }
        self
    }

    /// The status the loops that take it are woken for: QUEUED for a keyed execution due now
    /// (its key admits it when it is written, and a worker then claims it), else its own.
    pub fn wakes(&self) -> ExecutionStatus {
        if self.concurrency_key.is_some() && self.run_at <= crate::store::now() {
            ExecutionStatus::Queued
        } else {
            self.status
        }
    }
}
