//! A CRON job fired outside its schedule: now (`POST /jobs/{id}/trigger`), or the ticks of a
//! past range (`POST /jobs/{id}/backfill`), as Temporal Schedules and EventBridge Scheduler
//! offer. Both make executions of the job as it is (its input, its endpoint version, its
//! retry policy), recorded with their `trigger_reason`, under its overlap policy unless the
//! request names another.
//!
//! - A manual fire is keyed `manual:{Idempotency-Key}` within its job when the request sends the
//!   header (so a client's retry of the request fires once), else `manual:{execution id}`.
//! - A backfilled tick is keyed as the scheduler keys that tick (`{job_id}_{epoch ms}`), so a
//!   tick the schedule already made, or an earlier backfill, is not made again while its
//!   execution is kept (`TE_RETENTION`): repeating a backfill makes nothing new.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::idempotency::IdempotencyKey;
use super::policies::active_cron;
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::executions::ExecutionOut;
use crate::api::extract::{parse_json, ApiBytes, ApiJson};
use crate::api::state::AppState;
use crate::api::Created;
use crate::domain::tenant::own_name;
use crate::domain::{ExecutionStatus, OverlapPolicy, Scope, TriggerReason};
use crate::flow::Concurrency;
use crate::ids::{ExecutionId, JobId};
use crate::retry::RetryPolicy;
use crate::scheduler::cron_materializer::tick_execution;
use crate::scheduler::ticks::JobSchedule;
use crate::store::{now, Execution, ExecutionWrite, Inserted, Job};

/// The most ticks one backfill makes: a larger range is backfilled in parts.
pub const MAX_BACKFILL_TICKS: usize = 1_000;
/// How long listing a range's ticks may take: a schedule plugin may spend up to
/// `ticks::NEXT_CPU` on each.
const LISTING_DEADLINE: Duration = Duration::from_secs(2);

/// What a manual fire or a backfill does: "triggered", "backfilled".
const TRIGGERED: &str = "triggered";
const BACKFILLED: &str = "backfilled";

/// `POST /jobs/{id}/trigger` (the body is optional).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerIn {
    /// What this fire does while an earlier execution of the job is unfinished (default: the
    /// job's own `overlap_policy`).
    pub overlap_policy: Option<OverlapPolicy>,
}

/// Fire a CRON job now, outside its schedule.
///
/// One execution of the job, with `trigger_reason: manual`, due now; under the job's overlap
/// policy (or the body's): with `skip`, it is skipped while another execution of the job is
/// unfinished. The schedule is not changed, and a paused job can be fired. With an
/// `Idempotency-Key` header, repeating the request answers `200` with the first fire.
#[utoipa::path(post, path = "/jobs/{job_id}/trigger", tag = "jobs",
    params(
        ("job_id" = String, Path, description = "The job's id (`job_…`)."),
        ("Idempotency-Key" = Option<String>, Header, description = "Fire once however often the request is sent (1-255 characters)."),
    ),
    request_body(content = Option<TriggerIn>),
    responses(
        (status = 201, description = "The new execution.", body = ExecutionOut),
        (status = 200, description = "A repeat with the same `Idempotency-Key`: the first fire's execution.", body = ExecutionOut),
))]
pub(super) async fn trigger(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    key: IdempotencyKey,
    ApiBytes(body): ApiBytes,
) -> ApiResult<Created<ExecutionOut>> {
    // The body is optional: none is `{}`.
    let body: TriggerIn = if body.is_empty() { TriggerIn::default() } else { parse_json(&body)? };
    let job = active_cron(&state, &scope, &job_id, TRIGGERED).await?;
    let (max_attempts, concurrency) = delivery(&state, &job).await?;
    let at = now();
    let policy = body.overlap_policy.unwrap_or(job.overlap_policy);
    let tick = tick_execution(&job, at, max_attempts, at, Some((TriggerReason::Manual, policy)));
    let write = ExecutionWrite {
        idempotency_key: Some(format!("manual:{}", key.0.as_deref().unwrap_or(tick.execution_id.as_str()))),
        // Now, not at the jitter's offset: a manual fire is asked for now.
        run_at: at,
        status: if tick.overlap_policy.is_some() { ExecutionStatus::Pending } else { ExecutionStatus::Queued },
        ..tick
    }
    .keyed(concurrency.as_ref());
    let stored = insert(&state, &job_id, std::slice::from_ref(&write)).await?;
    let (status, execution) = match stored.into_iter().next() {
        Some(Inserted::Created(e)) => (StatusCode::CREATED, e),
        Some(Inserted::Existing(e)) => (StatusCode::OK, e),
        None => return Err(gone(&job_id)),
    };
    if status == StatusCode::CREATED {
        state.wakeups.executions_written(&state.store, [write.wakes()]).await;
    }
    Ok(Created(status, execution.into()))
}

/// `POST /jobs/{id}/backfill`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillIn {
    /// The range's start (its ticks at or after it), RFC 3339.
    pub from: DateTime<Utc>,
    /// The range's end (its ticks before it), RFC 3339; no later than now.
    pub to: DateTime<Utc>,
    /// What a backfilled tick does while an earlier execution of the job is unfinished
    /// (default: the job's own `overlap_policy`; `allow` runs every tick of the range).
    pub overlap_policy: Option<OverlapPolicy>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BackfillOut {
    pub job_id: JobId,
    /// How many ticks of the range were made by this request.
    pub created: usize,
    /// Every tick of the range, oldest first, with its execution.
    pub ticks: Vec<BackfilledTickOut>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BackfilledTickOut {
    /// The tick, RFC 3339 in UTC.
    pub at: String,
    /// The same instant in the job's timezone, with its offset.
    pub local: String,
    pub execution_id: ExecutionId,
    /// Made by this request (false: the schedule or an earlier backfill made it, and its
    /// execution is still kept).
    pub created: bool,
    pub status: ExecutionStatus,
}

/// Make the ticks of a past range.
///
/// Every tick of the job's schedule at or after `from` and before `to` (at most 1,000; `to`
/// no later than now) gets an execution with `trigger_reason: backfill`, due now, unless that
/// tick already has one (made by the schedule or an earlier backfill, and not yet deleted by
/// `TE_RETENTION`): repeating a backfill makes nothing new. Ticks are those of the job's
/// schedule in its timezone, before its `starts_at` too. Under the job's overlap policy, or
/// the body's.
#[utoipa::path(post, path = "/jobs/{job_id}/backfill", tag = "jobs",
    params(("job_id" = String, Path, description = "The job's id (`job_…`).")),
    request_body = BackfillIn,
    responses(
        (status = 200, description = "The range's ticks, each with its execution.", body = BackfillOut),
))]
pub(super) async fn backfill(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiJson(body): ApiJson<BackfillIn>,
) -> ApiResult<Json<BackfillOut>> {
    let at = now();
    if body.to > at {
        return Err(ApiError::invalid_field("to", "is in the future: the scheduler makes the ticks still to come"));
    }
    if body.from >= body.to {
        return Err(ApiError::invalid_field("from", "must be before `to`"));
    }
    let job = active_cron(&state, &scope, &job_id, BACKFILLED).await?;
    let ticks = range_ticks(&state, &job, body.from, body.to).await?;
    let (max_attempts, concurrency) = delivery(&state, &job).await?;
    let policy = body.overlap_policy.unwrap_or(job.overlap_policy);
    let writes: Vec<ExecutionWrite> = ticks
        .iter()
        .map(|tick| {
            tick_execution(&job, *tick, max_attempts, at, Some((TriggerReason::Backfill, policy)))
                .keyed(concurrency.as_ref())
        })
        .collect();
    let stored = insert(&state, &job_id, &writes).await?;
    if stored.len() != writes.len() {
        return Err(gone(&job_id));
    }
    let made: Vec<ExecutionStatus> =
        writes.iter().zip(&stored).filter(|(_, s)| matches!(s, Inserted::Created(_))).map(|(w, _)| w.wakes()).collect();
    state.wakeups.executions_written(&state.store, made.iter().copied()).await;
    let zone: chrono_tz::Tz = job.cron_timezone.as_deref().unwrap_or("UTC").parse().unwrap_or(chrono_tz::UTC);
    let ticks = ticks
        .into_iter()
        .zip(stored)
        .map(|(tick, stored)| {
            let (created, execution) = match stored {
                Inserted::Created(e) => (true, e),
                Inserted::Existing(e) => (false, e),
            };
            BackfilledTickOut {
                at: tick.to_rfc3339_opts(SecondsFormat::Secs, true),
                local: tick.with_timezone(&zone).to_rfc3339_opts(SecondsFormat::Secs, false),
                execution_id: execution.execution_id,
                created,
                status: execution.status,
            }
        })
        .collect();
    Ok(Json(BackfillOut { job_id, created: made.len(), ticks }))
}

/// The job's ticks at or after `from` and before `to`, oldest first: at most
/// [`MAX_BACKFILL_TICKS`], listed within [`LISTING_DEADLINE`].
async fn range_ticks(
    state: &AppState,
    job: &Job,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> ApiResult<Vec<DateTime<Utc>>> {
    let schedule = JobSchedule::of(job, &state.plugins)
        .await
        .map_err(|e| ApiError::new(ErrorCode::InvalidCron, format!("The job's schedule cannot be read: {}", e.0)))?;
    let failed = |e: crate::scheduler::schedule::ScheduleError| {
        ApiError::new(ErrorCode::InvalidCron, format!("The job's schedule failed: {}", e.0))
    };
    let started = tokio::time::Instant::now();
    let after = from
        .checked_sub_signed(chrono::Duration::microseconds(1))
        .ok_or_else(|| ApiError::invalid_field("from", "is too far in the past"))?;
    let first = tokio::time::timeout(LISTING_DEADLINE, schedule.next_after(after)).await.map_err(|_| too_slow())?;
    let Some(first) = first.map_err(failed)?.filter(|tick| *tick < to) else { return Ok(Vec::new()) };
    // One more than the most, to tell a range that holds more.
    let left = LISTING_DEADLINE.saturating_sub(started.elapsed());
    let (mut ticks, truncated) =
        schedule.upcoming(first, Some(to), MAX_BACKFILL_TICKS + 1, left).await.map_err(failed)?;
    if truncated {
        return Err(too_slow());
    }
    if let Some(beyond) = ticks.get(MAX_BACKFILL_TICKS) {
        return Err(ApiError::invalid_field(
            "to",
            format!(
                "makes a range of more than {MAX_BACKFILL_TICKS} ticks: backfill it in parts (the first {MAX_BACKFILL_TICKS} end before {})",
                beyond.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
        ));
    }
    ticks.truncate(MAX_BACKFILL_TICKS);
    Ok(ticks)
}

fn too_slow() -> ApiError {
    ApiError::invalid_field(
        "to",
        format!(
            "makes a range whose ticks took over {} s to list (a slow schedule plugin): backfill a shorter range",
            LISTING_DEADLINE.as_secs()
        ),
    )
}

/// How many times the job's executions are tried: its endpoint version's retry policy.
/// How a job's fires are delivered: the attempts its endpoint allows, and the endpoint's
/// concurrency key.
async fn delivery(state: &AppState, job: &Job) -> ApiResult<(i32, Option<Concurrency>)> {
    let endpoint = state.store.endpoint_for_job(&job.endpoint, job.endpoint_version).await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::EndpointNotFound,
            format!("Endpoint '{}' of job '{}' no longer exists.", own_name(&job.endpoint), job.job_id),
        )
    })?;
    Ok((RetryPolicy::attempts_allowed(&endpoint.retry_policy), endpoint.concurrency))
}

/// The writes as stored, in order; an empty list when the job was deleted meanwhile.
async fn insert(state: &AppState, job_id: &JobId, writes: &[ExecutionWrite]) -> ApiResult<Vec<Inserted<Execution>>> {
    let stored = state.store.execution_insert_many(writes).await?;
    tracing::debug!(%job_id, asked = writes.len(), "Fired a cron job outside its schedule.");
    Ok(stored.into_iter().flatten().collect())
}

fn gone(job_id: &JobId) -> ApiError {
    ApiError::new(ErrorCode::JobNotFound, format!("Job with ID '{job_id}' was deleted while it was being fired."))
}
