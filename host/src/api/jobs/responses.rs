//! What the jobs routes answer: a job ([`JobOut`]) and a job's status ([`JobStatusOut`]).
//! Times are UTC RFC 3339 with microseconds, except a cron job's ticks, which are shown in the
//! job's own timezone (as docs/api.md shows `next_run_at`).

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use serde_json::Value;

use crate::domain::tenant::own_name;
use crate::domain::{CatchupPolicy, EndpointType, ExecutionStatus, JobStatus, OverlapPolicy, Trigger};
use crate::ids::{ExecutionId, JobId};
use crate::store::{now, Execution, Job};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobOut {
    pub job_id: JobId,
    /// The tenant it belongs to (its endpoint's).
    pub tenant: String,
    pub endpoint: String,
    pub endpoint_version: Option<i32>,
    pub endpoint_type: EndpointType,
    pub trigger: Trigger,
    pub status: JobStatus,
    pub version: i32,
    pub idempotency_key: Option<String>,
    pub input: Value,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<String>,
    /// A DELAYED job's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// A one-shot job's execution not started by then fails unsent (`DEADLINE_EXCEEDED`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Its executions should start within this many milliseconds of their time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sla_ms: Option<i32>,
    /// The endpoint told when an execution of this job fails, in place of its endpoint's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    /// The endpoint told when an execution of this job succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_success: Option<String>,
    /// A one-shot job's execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<JobExecutionOut>,
    /// A CRON job's schedule, beside the other fields.
    #[serde(flatten)]
    pub schedule: Option<CronScheduleOut>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobExecutionOut {
    pub execution_id: ExecutionId,
    pub status: ExecutionStatus,
    pub created_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CronScheduleOut {
    pub cron: Option<String>,
    /// The schedule plugin computing the ticks, in place of `cron`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<super::cron_plan::ScheduleIn>,
    pub timezone: Option<String>,
    pub starts_at: Option<String>,
    pub ends_at: Option<String>,
    pub next_run_at: Option<String>,
    pub last_tick_at: Option<String>,
    pub previous_version_id: Option<JobId>,
    pub replaced_by_id: Option<JobId>,
    /// Set while the job is paused (`POST /jobs/{id}/pause`); `next_run_at` is then null.
    pub paused_at: Option<String>,
    pub overlap_policy: OverlapPolicy,
    pub catchup_policy: CatchupPolicy,
    /// Null: no limit (60s under `catchup_policy: none`).
    pub catchup_window: Option<String>,
    /// Each tick fires up to this many milliseconds after its time (0: at its time).
    pub jitter_ms: i32,
}

impl JobOut {
    /// A job as the API shows it. `execution` is the one-shot job's execution, with the status
    /// to show for it: as created (for creates and their repeats) or as it is now (for reads).
    pub fn new(job: &Job, execution: Option<(&Execution, Option<ExecutionStatus>)>) -> Self {
        let schedule = (job.trigger_type == Trigger::Cron).then(|| {
            let tz = job.cron_timezone.as_deref();
            let (next, last) = cron_ticks(job);
            CronScheduleOut {
                cron: job.cron_expression.clone(),
                schedule: super::cron_plan::ScheduleIn::of(job),
                timezone: job.cron_timezone.clone(),
                starts_at: job.cron_starts_at.as_ref().map(utc),
                ends_at: job.cron_ends_at.as_ref().map(utc),
                next_run_at: next.as_ref().map(|t| local(t, tz)),
                last_tick_at: last.as_ref().map(|t| local(t, tz)),
                previous_version_id: job.previous_version_id.clone(),
                replaced_by_id: job.replaced_by_id.clone(),
                paused_at: job.paused_at.as_ref().map(utc),
                overlap_policy: job.overlap_policy,
                catchup_policy: job.catchup_policy,
                catchup_window: job.catchup_window_sec.map(super::policies::format_window),
                jitter_ms: job.cron_jitter_ms.unwrap_or(0),
            }
        });
        Self {
            job_id: job.job_id.clone(),
            tenant: crate::domain::tenant::tenant_of(&job.endpoint).to_owned(),
            // Only its own tenant reads it: names shown as that tenant knows them.
            endpoint: own_name(&job.endpoint).to_owned(),
            endpoint_version: job.endpoint_version,
            endpoint_type: job.endpoint_type,
            trigger: job.trigger_type,
            status: job.status,
            version: job.version,
            idempotency_key: job.idempotency_key.clone(),
            input: job.input.clone().unwrap_or_default(),
            created_at: utc(&job.created_at),
            retired_at: job.retired_at.as_ref().map(utc),
            run_at: job.run_at.as_ref().map(utc),
            expires_at: job.expires_at.as_ref().map(utc),
            sla_ms: job.sla_ms,
            on_failure: job.on_failure.as_deref().map(|n| own_name(n).to_owned()),
            on_success: job.on_success.as_deref().map(|n| own_name(n).to_owned()),
            execution: execution.map(|(e, status)| JobExecutionOut {
                execution_id: e.execution_id.clone(),
                status: status.unwrap_or(e.status),
                created_at: utc(&e.created_at),
            }),
            schedule,
        }
    }
}

/// `GET /jobs/{id}/status`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct JobStatusOut {
    pub job_id: JobId,
    pub endpoint: String,
    pub endpoint_type: EndpointType,
    pub trigger: Trigger,
    pub status: JobStatus,
    /// IDLE, HEALTHY, DEGRADED or FAILING, from the last 24 hours' failure rate.
    pub health: &'static str,
    pub version: i32,
    pub last_execution: Option<LastExecutionOut>,
    pub active_executions: ActiveExecutionsOut,
    pub stats: StatsOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<StatusCronOut>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LastExecutionOut {
    pub execution_id: ExecutionId,
    pub status: ExecutionStatus,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub attempt_number: i32,
}

impl From<&Execution> for LastExecutionOut {
    fn from(e: &Execution) -> Self {
        Self {
            execution_id: e.execution_id.clone(),
            status: e.status,
            started_at: e.started_at.as_ref().map(utc),
            completed_at: e.completed_at.as_ref().map(utc),
            attempt_number: e.attempt_count,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ActiveExecutionsOut {
    /// PENDING, QUEUED and RETRYING.
    pub pending: i64,
    pub running: i64,
    pub total: i64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatsOut {
    pub last_24h: WindowStatsOut,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WindowStatsOut {
    pub total: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub avg_duration_ms: Option<i64>,
    pub p99_duration_ms: Option<i64>,
    /// How the job's executions met its `sla_ms` (a job with an SLA only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sla: Option<SlaOut>,
}

/// Executions claimed in the window (the newest 10,000 at most) against the job's SLA.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SlaOut {
    pub sla_ms: i32,
    /// Executions whose first attempt started in the window.
    pub started: usize,
    /// Those that started within `sla_ms` of their time.
    pub met: usize,
    /// `met / started` (null when nothing started).
    pub ratio: Option<f64>,
    /// The worst lateness among them, in milliseconds.
    pub max_lateness_ms: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StatusCronOut {
    pub expression: Option<String>,
    pub timezone: Option<String>,
    pub next_run_at: Option<String>,
    pub last_tick_at: Option<String>,
}

impl StatusCronOut {
    pub fn new(job: &Job) -> Option<Self> {
        (job.trigger_type == Trigger::Cron).then(|| {
            let tz = job.cron_timezone.as_deref();
            let (next, last) = cron_ticks(job);
            Self {
                expression: job.cron_expression.clone(),
                timezone: job.cron_timezone.clone(),
                next_run_at: next.as_ref().map(|t| local(t, tz)),
                last_tick_at: last.as_ref().map(|t| local(t, tz)),
            }
        })
    }
}

pub fn utc(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A cron time in the job's own timezone, as docs/api.md shows `next_run_at`.
pub fn local(t: &DateTime<Utc>, timezone: Option<&str>) -> String {
    match timezone.and_then(|tz| tz.parse::<Tz>().ok()) {
        Some(tz) => t.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Secs, false),
        None => utc(t),
    }
}

/// The status a one-shot job's execution was created with (what a create, and its idempotent
/// repeats, answer), derived from the job so every repeat shows the same body.
pub fn initial_status(job: &Job) -> ExecutionStatus {
    match job.run_at {
        Some(run_at) if job.trigger_type == Trigger::Delayed && run_at > job.created_at => ExecutionStatus::Pending,
        _ => ExecutionStatus::Queued,
    }
}

/// A cron job's next and last tick as a user means them. The scheduler materializes a tick
/// ahead of its time, so the stored last tick may still be waiting: then it is the next tick,
/// and the one before it the last (a retired job's waiting tick was cancelled, so it is neither).
fn cron_ticks(job: &Job) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    match job.cron_last_tick_at {
        // Paused: no next tick; one made ahead was withdrawn.
        Some(waiting) if job.paused_at.is_some() && waiting > now() => (None, job.cron_prev_tick_at),
        last if job.paused_at.is_some() => (None, last),
        Some(waiting) if waiting > now() => {
            let next = if job.status == JobStatus::Active { Some(waiting) } else { job.cron_next_run_at };
            (next, job.cron_prev_tick_at)
        }
        last => (job.cron_next_run_at, last),
    }
}
