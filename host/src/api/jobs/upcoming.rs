//! `GET /jobs/{id}/upcoming`: a CRON job's next ticks, in UTC and in the job's timezone, as the
//! scheduler will make them (from its next tick, through the same daylight-saving rules, up to
//! `ends_at`).

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;
use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};

use super::{load, with_article};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::extract::ApiQuery;
use crate::api::state::AppState;
use crate::domain::{JobStatus, Scope, Trigger};
use crate::ids::JobId;
use crate::scheduler::ticks::JobSchedule;

/// The most ticks one request lists.
const MAX_LIMIT: usize = 100;
/// How long listing may take: a schedule plugin may spend up to `ticks::NEXT_CPU` on each tick.
const DEADLINE: Duration = Duration::from_secs(2);

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct UpcomingParams {
    /// How many ticks, 1 to 100 (default 10).
    pub limit: Option<usize>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct UpcomingOut {
    pub job_id: JobId,
    /// The job's IANA timezone, in which `local` is given.
    pub timezone: String,
    /// A paused or retired job makes no ticks: `ticks` is empty.
    pub paused: bool,
    pub ticks: Vec<TickOut>,
    /// The listing stopped at its time limit (a slow schedule plugin) before `limit` ticks.
    pub truncated: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct TickOut {
    /// RFC 3339 in UTC.
    pub at: String,
    /// The same instant in the job's timezone, with its offset (`2026-03-29T03:30:00+02:00`).
    pub local: String,
    /// When the tick fires, in UTC with milliseconds: `at` plus the job's jitter for this tick
    /// (`at` itself for a job without `jitter_ms`).
    pub fires_at: String,
}

/// A CRON job's next ticks, soonest first.
#[utoipa::path(get, path = "/jobs/{job_id}/upcoming", tag = "jobs",
    params(("job_id" = String, Path, description = "The job's id (`job_…`)."), UpcomingParams),
    responses(
        (status = 200, description = "The next ticks, in UTC and in the job's timezone.", body = UpcomingOut),
))]
pub async fn upcoming(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiQuery(params): ApiQuery<UpcomingParams>,
) -> ApiResult<Json<UpcomingOut>> {
    let limit = params.limit.unwrap_or(10);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::invalid_field("limit", format!("must be 1 to {MAX_LIMIT}, got {limit}")));
    }
    let job = load(&state, &scope, &job_id).await?;
    if job.trigger_type != Trigger::Cron {
        return Err(ApiError::new(
            ErrorCode::JobNotUpdatable,
            format!("Job '{job_id}' is {} job; only CRON jobs have upcoming ticks.", with_article(job.trigger_type)),
        ));
    }
    let zone_name = job.cron_timezone.clone().unwrap_or_else(|| "UTC".to_owned());
    let zone: chrono_tz::Tz = zone_name.parse().unwrap_or(chrono_tz::UTC);
    let mut out = UpcomingOut {
        job_id,
        timezone: zone_name,
        paused: job.paused_at.is_some(),
        ticks: Vec::new(),
        truncated: false,
    };
    // The next tick the scheduler will make (None: paused, or past `ends_at`).
    let next = job.cron_next_run_at.filter(|_| job.status == JobStatus::Active);
    let Some(at) = next else { return Ok(Json(out)) };
    let schedule = JobSchedule::of(&job, &state.plugins)
        .await
        .map_err(|e| ApiError::new(ErrorCode::InvalidCron, format!("The job's schedule cannot be read: {}", e.0)))?;
    let (ticks, truncated) = schedule
        .upcoming(at, job.cron_ends_at, limit, DEADLINE)
        .await
        .map_err(|e| ApiError::new(ErrorCode::InvalidCron, format!("The job's schedule failed: {}", e.0)))?;
    out.ticks = ticks
        .into_iter()
        .map(|at| TickOut {
            at: at.to_rfc3339_opts(SecondsFormat::Secs, true),
            local: at.with_timezone(&zone).to_rfc3339_opts(SecondsFormat::Secs, false),
            fires_at: crate::scheduler::jitter::fires_at(&job.job_id, at, job.cron_jitter_ms)
                .to_rfc3339_opts(SecondsFormat::Millis, true),
        })
        .collect();
    out.truncated = truncated;
    Ok(Json(out))
}
