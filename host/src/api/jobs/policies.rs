//! A CRON job's schedule policies: pause and resume, what a tick does while an earlier
//! execution is unfinished (`overlap_policy`), and which missed ticks are made up
//! (`catchup_policy`, `catchup_window`). The scheduler applies them (`scheduler::cron_materializer`
//! and the promoter); here they are checked and changed.

use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::responses::JobOut;
use super::{load, with_article};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::extract::{parse_json, ApiBytes};
use crate::api::state::AppState;
use crate::domain::{JobStatus, Scope, Trigger};
use crate::ids::JobId;
use crate::scheduler::ticks::JobSchedule;
use crate::store::{now, Job};

const PAUSED: &str = "paused and resumed";

/// The longest `catchup_window`: a year.
const MAX_WINDOW_SEC: i64 = 366 * 24 * 3600;

/// A `catchup_window` such as `90s`, `15m`, `2h` or `7d` (a bare number is seconds), in seconds.
pub fn parse_window(text: &str) -> ApiResult<i32> {
    crate::duration::parse_seconds(text)
        .filter(|seconds| (1..=MAX_WINDOW_SEC).contains(seconds))
        .and_then(|seconds| i32::try_from(seconds).ok())
        .ok_or_else(|| {
            ApiError::invalid_field(
                "catchup_window",
                format!("`{text}` is not a duration from 1s to 366d: write it as 90s, 15m, 2h or 7d"),
            )
        })
}

/// The longest `sla_ms`: a day.
const MAX_SLA_MS: i32 = 86_400_000;

/// A job's `sla_ms`, if given, is 1 ms to a day.
pub fn check_sla(sla_ms: Option<i32>) -> ApiResult<()> {
    match sla_ms {
        Some(ms) if !(1..=MAX_SLA_MS).contains(&ms) => {
            Err(ApiError::invalid_field("sla_ms", format!("must be between 1 and {MAX_SLA_MS} milliseconds, got {ms}")))
        }
        _ => Ok(()),
    }
}

/// The longest `jitter_ms`: an hour.
const MAX_JITTER_MS: i32 = 3_600_000;

/// A CRON job's `jitter_ms`, 0 to an hour, as stored (0 and absent: none).
pub fn check_jitter(jitter_ms: Option<i32>) -> ApiResult<Option<i32>> {
    match jitter_ms {
        Some(ms) if !(0..=MAX_JITTER_MS).contains(&ms) => Err(ApiError::invalid_field(
            "jitter_ms",
            format!("must be between 0 and {MAX_JITTER_MS} milliseconds, got {ms}"),
        )),
        Some(0) | None => Ok(None),
        given => Ok(given),
    }
}

/// A window as the API shows it: `900` is `15m`.
pub fn format_window(seconds: i32) -> String {
    crate::duration::format_seconds(i64::from(seconds))
}

/// The job, if it is a CRON job that has not been retired: only those can be updated, paused
/// or resumed. `what` ends the refusal's sentence: "only CRON jobs can be {what}."
pub(super) async fn active_cron(state: &AppState, scope: &Scope, job_id: &JobId, what: &str) -> ApiResult<Job> {
    let job = load(state, scope, job_id).await?;
    if job.trigger_type != Trigger::Cron {
        return Err(ApiError::new(
            ErrorCode::JobNotUpdatable,
            format!("Job '{job_id}' is {} job; only CRON jobs can be {what}.", with_article(job.trigger_type)),
        ));
    }
    if job.status != JobStatus::Active {
        let latest =
            job.replaced_by_id.as_deref().map(|id| format!(" Its newer version is '{id}'.")).unwrap_or_default();
        return Err(ApiError::new(ErrorCode::JobNotUpdatable, format!("Job '{job_id}' is retired.{latest}")));
    }
    Ok(job)
}

/// Pause a CRON job: it makes no ticks until resumed.
///
/// A tick already made ahead of its time (or held by `buffer_one`) is withdrawn (it never
/// ran); an execution already queued or running finishes. Pausing a paused job changes nothing.
#[utoipa::path(post, path = "/jobs/{job_id}/pause", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), responses(
    (status = 200, description = "The job, with `paused_at` set.", body = JobOut),
))]
pub(super) async fn pause(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
) -> ApiResult<Json<JobOut>> {
    active_cron(&state, &scope, &job_id, PAUSED).await?;
    state.store.job_pause(&job_id, now()).await?;
    Ok(Json(JobOut::new(&load(&state, &scope, &job_id).await?, None)))
}

/// `POST /jobs/{id}/resume`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeIn {
    /// Make up the ticks missed while paused, as the job's `catchup_policy` says (default
    /// false: the schedule carries on from the next tick after now).
    #[serde(default)]
    pub catch_up: bool,
}

/// Resume a paused CRON job.
///
/// From the first tick after now; with `{"catch_up": true}`, from the first tick after it was
/// paused, the missed ones made up as its `catchup_policy` and `catchup_window` say. Resuming
/// a job that is not paused changes nothing.
#[utoipa::path(post, path = "/jobs/{job_id}/resume", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), request_body(content = Option<ResumeIn>), responses(
    (status = 200, description = "The job, running its schedule again.", body = JobOut),
))]
pub(super) async fn resume(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiBytes(body): ApiBytes,
) -> ApiResult<Json<JobOut>> {
    // The body is optional: none is `{}`.
    let body: ResumeIn = if body.is_empty() { ResumeIn::default() } else { parse_json(&body)? };
    let job = active_cron(&state, &scope, &job_id, PAUSED).await?;
    let catch_up = body.catch_up;
    if let Some(paused_at) = job.paused_at {
        let from = if catch_up { paused_at } else { now() };
        state.store.job_resume(&job_id, next_tick(&state, &job, from).await).await?;
        state.wakeups.cron_job_changed(&state.store).await;
    }
    Ok(Json(JobOut::new(&load(&state, &scope, &job_id).await?, None)))
}

/// The job's first tick after `from` (and not before it starts), if its schedule has one left.
async fn next_tick(state: &AppState, job: &Job, from: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let schedule = JobSchedule::of(job, &state.plugins).await.ok()?;
    let from = job.cron_starts_at.map_or(from, |start| from.max(start - chrono::Duration::microseconds(1)));
    let next = schedule.next_after(from).await;
    if let Err(error) = &next {
        tracing::warn!(job_id = %job.job_id, error = %error.0, "The resumed job's next tick could not be computed.");
    }
    next.ok().flatten().filter(|t| job.cron_ends_at.is_none_or(|end| *t < end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_one_second_to_366_days() {
        assert_eq!(parse_window("15m").ok(), Some(900));
        assert_eq!(format_window(900), "15m");
        for bad in ["", "0s", "5w", "367d"] {
            let error = parse_window(bad).err().unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(error.message.contains("`catchup_window`"), "{}", error.message);
        }
    }
}
