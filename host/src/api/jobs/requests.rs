//! What the jobs routes accept: bodies and query parameters.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::cron_plan::ScheduleIn;
use crate::domain::{CatchupPolicy, OverlapPolicy, Trigger};

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobIn {
    pub endpoint: String,
    pub trigger: Trigger,
    pub idempotency_key: Option<String>,
    pub input: Option<Value>,
    pub run_at: Option<DateTime<Utc>>,
    /// For a DELAYED job, instead of `run_at`: fire this many milliseconds after the create.
    pub delay_ms: Option<u64>,
    /// IMMEDIATE and DELAYED only: if its execution has not started by then (its endpoint
    /// paused, a backlog), it fails unsent with `DEADLINE_EXCEEDED`. After the job's time.
    pub expires_at: Option<DateTime<Utc>>,
    pub cron: Option<String>,
    /// CRON only, in place of `cron`: a schedule plugin computes the ticks.
    pub schedule: Option<ScheduleIn>,
    pub timezone: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    /// CRON only: what a tick does while an earlier execution is unfinished (default `allow`).
    pub overlap_policy: Option<OverlapPolicy>,
    /// CRON only: which missed ticks are made up (default `all`).
    pub catchup_policy: Option<CatchupPolicy>,
    /// CRON only: how late a tick may be and still be made (`90s`, `15m`, `2h`, `7d`; default:
    /// no limit, or `60s` under `catchup_policy: none`).
    pub catchup_window: Option<String>,
    /// CRON only: each tick fires up to this many milliseconds after its time (0 to 3,600,000;
    /// default 0), by an offset fixed per job and tick, so that many jobs on one schedule do
    /// not all fire at the same instant.
    #[schema(minimum = 0, maximum = 3_600_000)]
    pub jitter_ms: Option<i32>,
    /// Its executions should start within this many milliseconds of their time (1 to
    /// 86,400,000); each shows `sla_met`, and `GET /jobs/{id}/status` the ratio met.
    #[schema(minimum = 1, maximum = 86_400_000)]
    pub sla_ms: Option<i32>,
    /// An endpoint to tell when an execution of this job fails (in place of its endpoint's
    /// `on_failure`).
    pub on_failure: Option<String>,
    /// An endpoint to tell when an execution of this job succeeds: it gets a job whose input
    /// is the execution's id and what the receiver answered (status, headers, body as stored,
    /// secrets redacted).
    pub on_success: Option<String>,
}

/// `PUT /jobs/{id}`: what changes in the cron job's next version; absent fields carry over.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobUpdateIn {
    /// A new cron expression (in place of a schedule plugin, if the job had one).
    pub cron: Option<String>,
    /// A schedule plugin (in place of the cron expression, if the job had one).
    pub schedule: Option<ScheduleIn>,
    pub timezone: Option<String>,
    pub input: Option<Value>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub overlap_policy: Option<OverlapPolicy>,
    pub catchup_policy: Option<CatchupPolicy>,
    pub catchup_window: Option<String>,
    /// 0 to 3,600,000 (0: none).
    #[schema(minimum = 0, maximum = 3_600_000)]
    pub jitter_ms: Option<i32>,
    #[schema(minimum = 1, maximum = 86_400_000)]
    pub sla_ms: Option<i32>,
    pub on_failure: Option<String>,
    pub on_success: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobListParams {
    /// Only jobs for this endpoint.
    pub endpoint: Option<String>,
    /// `ACTIVE` or `RETIRED`.
    pub status: Option<String>,
    /// `IMMEDIATE`, `DELAYED` or `CRON`.
    pub trigger: Option<String>,
    /// Items per page: 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `oldest` (the default) or `newest` first.
    pub order: Option<crate::api::pagination::ListOrder>,
    /// The `cursor` of the previous page.
    pub cursor: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExecutionListParams {
    /// Only executions with this status (`PENDING`, `QUEUED`, `RUNNING`, `RETRYING`, `SUCCESS`,
    /// `FAILED`, `CANCELLED`).
    pub status: Option<String>,
    /// Items per page: 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `oldest` (the default) or `newest` first.
    pub order: Option<crate::api::pagination::ListOrder>,
    /// The `cursor` of the previous page.
    pub cursor: Option<String>,
}
