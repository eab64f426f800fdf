//! `/jobs`: invocations of an endpoint — now (IMMEDIATE), later (DELAYED), or on a schedule
//! (CRON). Jobs are immutable; a cron job is "updated" by a new version that retires the old.

//!
//! - [`requests`]: the bodies and query parameters the routes accept;
//! - [`responses`]: what they answer ([`responses::JobOut`], [`responses::JobStatusOut`]);
//! - `batch`: `POST /jobs/batch`, many creates answered one by one and written together;
//! - `cron_plan`: a cron schedule checked and its first tick found;
//! - `policies`: a cron job's pause and resume, and its overlap and catch-up policies;
//! - `status`: `GET /jobs/{id}/status`;
//! - `fire`: a CRON job fired now or over a past range (`trigger`, `backfill`).
//!
//! Input is checked against the endpoint's payload spec by [`crate::api::validators`].

mod batch;
mod cron_plan;
mod events;
mod fire;
mod idempotency;
mod policies;
mod repeat;
pub mod requests;
pub mod responses;
mod status;
mod upcoming;

use repeat::answer;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde_json::json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use self::cron_plan::{plan_cron, ScheduleAsked, ScheduleIn};
use self::idempotency::IdempotencyKey;
use self::requests::{ExecutionListParams, JobIn, JobListParams, JobUpdateIn};
use self::responses::{initial_status, JobOut};
use super::executions::ExecutionOut;
use super::extract::{ApiJson, ApiQuery};
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::validators::validate_input;
use super::Created;
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::{CatchupPolicy, ExecutionStatus, JobStatus, OverlapPolicy, Scope, Trigger};
use crate::ids::JobId;
use crate::retry::RetryPolicy;
use crate::store::{
    now, Deleted, Execution, ExecutionWrite, Inserted, Job, JobFilter, JobWrite, NewJob, PageKey, StoreError,
};
use crate::trace::TraceParent;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(batch::create_batch))
        .routes(routes!(read, update, delete))
        .routes(routes!(cancel))
        .routes(routes!(policies::pause))
        .routes(routes!(policies::resume))
        .routes(routes!(status::status))
        .routes(routes!(upcoming::upcoming))
        .routes(routes!(fire::trigger))
        .routes(routes!(fire::backfill))
        .routes(routes!(versions))
        .routes(routes!(executions))
        .routes(routes!(events::events))
}

/// "an IMMEDIATE", "a DELAYED", "a CRON".
fn with_article(trigger: Trigger) -> String {
    let article = if trigger == Trigger::Immediate { "an" } else { "a" };
    format!("{article} {trigger}")
}

/// The longest key a client may choose.
const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

fn not_found(job_id: &str) -> ApiError {
    ApiError::new(ErrorCode::JobNotFound, format!("Job with ID '{job_id}' does not exist."))
}

/// Create a job: IMMEDIATE, DELAYED (`run_at` or `delay_ms`) or CRON.
#[utoipa::path(post, path = "/jobs", tag = "jobs", request_body = JobIn,
    params(("Idempotency-Key" = Option<String>, Header, description = "The job's `idempotency_key`, given as a header (1-255 characters); a body that names a key too must name the same one.")),
    responses(
        (status = 201, description = "Created; a one-shot job shows its execution as created.", body = JobOut),
        (status = 200, description = "An idempotent repeat: the first create's answer.", body = JobOut),
))]
async fn create(
    State(state): State<AppState>,
    scope: Scope,
    key: IdempotencyKey,
    ApiJson(mut body): ApiJson<JobIn>,
) -> ApiResult<Created<JobOut>> {
    body.idempotency_key = key.for_job(body.idempotency_key.take())?;
    state.quotas.take_creates(scope.tenant(), 1)?;
    let stored = scope.stored(&body.endpoint);
    let endpoint = state.endpoint_reader.get(&stored).await?.ok_or_else(|| endpoint_not_found(&body.endpoint))?;
    let prepared = prepare(&state, &scope, body, &endpoint).await?;
    if let Err(refused) = held_within_quotas(&state, &scope, &[&prepared]).await {
        // A repeat of a create that was made is answered as one, whatever the quotas now.
        let job = &prepared.new.job;
        let made = match &job.idempotency_key {
            Some(key) => state.store.job_get_by_key(&job.endpoint, key).await?,
            None => None,
        };
        if made.is_none() {
            return Err(refused);
        }
    }
    let Prepared { new, run_at_given } = prepared;
    let (new, inserted) = state.job_writer.insert(new).await.map_err(|e| endpoint_gone(e, &endpoint.name))?;
    let prepared = Prepared { new, run_at_given };
    let answer = answer(&state, &prepared, inserted).await?;
    if answer.0 == StatusCode::CREATED {
        wake(&state, &[&prepared]).await;
    }
    Ok(answer)
}

/// Creates that would take their tenant past its active CRON jobs or unfinished executions
/// are refused, all together (`crate::quota`).
pub(super) async fn held_within_quotas(state: &AppState, scope: &Scope, created: &[&Prepared]) -> ApiResult<()> {
    let cron = created.iter().filter(|p| p.new.execution.is_none()).count() as u64;
    let executions = created.len() as u64 - cron;
    if cron > 0 {
        state.quotas.cron_jobs_added(&*state.store, scope.tenant(), cron).await?;
    }
    if executions > 0 {
        state.quotas.executions_added(&*state.store, scope.tenant(), executions).await?;
    }
    Ok(())
}

/// A job's callbacks: `on_failure` and `on_success` each name an existing endpoint of the
/// caller's tenant other than the job's own (`endpoint`, stored: a callback told to the
/// endpoint it reports on).
async fn check_callbacks(
    state: &AppState,
    scope: &Scope,
    on_failure: Option<&str>,
    on_success: Option<&str>,
    endpoint: &str,
) -> ApiResult<()> {
    for (field, target) in [("on_failure", on_failure), ("on_success", on_success)] {
        let Some(target) = target else { continue };
        if scope.stored(target) == endpoint {
            return Err(ApiError::invalid_field(
                field,
                "names the job's own endpoint: its executions would be reported to the endpoint they report on",
            ));
        }
        crate::api::endpoints::require_callback(state, scope, field, target).await?;
    }
    Ok(())
}

/// `name` as given, or as stored (then shown as its own tenant knows it).
fn endpoint_not_found(name: &str) -> ApiError {
    let name = crate::domain::tenant::own_name(name);
    ApiError::new(ErrorCode::EndpointNotFound, format!("Endpoint '{name}' does not exist."))
}

/// A write's error, where the store found the endpoint `name` gone (deleted while the request
/// ran) answered as the endpoint not found.
fn endpoint_gone(error: StoreError, name: &str) -> ApiError {
    match error {
        StoreError::ForeignKeyViolation => endpoint_not_found(name),
        other => other.into(),
    }
}

/// A create, checked and ready to write.
pub(super) struct Prepared {
    new: NewJob,
    /// `run_at` was given (not `delay_ms`): a repeat must give the same.
    run_at_given: bool,
}

/// Check a create against its endpoint (of `scope`'s tenant) and make the rows it writes.
pub(super) async fn prepare(
    state: &AppState,
    scope: &Scope,
    body: JobIn,
    endpoint: &crate::store::Endpoint,
) -> ApiResult<Prepared> {
    let trigger = body.trigger;
    let refuse = |field: &str, present: bool| {
        if present {
            Err(ApiError::invalid_field(field, format!("does not apply to {} job", with_article(trigger))))
        } else {
            Ok(())
        }
    };
    if trigger != Trigger::Cron {
        refuse("cron", body.cron.is_some())?;
        refuse("schedule", body.schedule.is_some())?;
        refuse("timezone", body.timezone.is_some())?;
        refuse("starts_at", body.starts_at.is_some())?;
        refuse("ends_at", body.ends_at.is_some())?;
        refuse("overlap_policy", body.overlap_policy.is_some())?;
        refuse("catchup_policy", body.catchup_policy.is_some())?;
        refuse("catchup_window", body.catchup_window.is_some())?;
        refuse("jitter_ms", body.jitter_ms.is_some())?;
    } else {
        refuse("expires_at", body.expires_at.is_some())?;
    }
    if trigger != Trigger::Delayed {
        refuse("run_at", body.run_at.is_some())?;
        refuse("delay_ms", body.delay_ms.is_some())?;
    }
    match &body.idempotency_key {
        None if trigger != Trigger::Cron => {
            return Err(ApiError::invalid_field(
                "idempotency_key",
                format!("is required for {} job", with_article(trigger)),
            ))
        }
        Some(key) if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN => {
            return Err(ApiError::invalid_field(
                "idempotency_key",
                format!("must be 1-{MAX_IDEMPOTENCY_KEY_LEN} characters"),
            ))
        }
        _ => {}
    }
    policies::check_sla(body.sla_ms)?;
    check_callbacks(state, scope, body.on_failure.as_deref(), body.on_success.as_deref(), &endpoint.name).await?;
    let input = body.input.unwrap_or_else(|| json!({}));
    state.quotas.input_fits(scope.tenant(), &input)?;
    validate_input(&*state.store, &state.validators, endpoint.payload_spec.as_deref(), &input).await?;
    let run_at_given = body.run_at.is_some();

    let at = now();
    let max_attempts = RetryPolicy::attempts_allowed(&endpoint.retry_policy);
    let mut job = JobWrite {
        idempotency_key: body.idempotency_key.clone(),
        input,
        // This request's trace: every delivery of the job continues it (see `crate::trace`).
        trace_parent: TraceParent::current().map(|t| t.to_string()),
        overlap_policy: body.overlap_policy.unwrap_or(OverlapPolicy::Allow),
        catchup_policy: body.catchup_policy.unwrap_or(CatchupPolicy::All),
        catchup_window_sec: body.catchup_window.as_deref().map(policies::parse_window).transpose()?,
        cron_jitter_ms: policies::check_jitter(body.jitter_ms)?,
        sla_ms: body.sla_ms,
        on_failure: scope.stored_opt(body.on_failure.as_deref()),
        on_success: scope.stored_opt(body.on_success.as_deref()),
        ..JobWrite::on(endpoint, trigger, at)
    };
    tracing::Span::current().record("job_id", tracing::field::display(&job.job_id));
    if let Some(concurrency) = &endpoint.concurrency {
        // Every execution of the job is made of its input: one that lacks the key's fields
        // is refused now, not keyed by chance later.
        concurrency.key_of(&job.input).map_err(|e| ApiError::invalid_field(&e.field, e.why))?;
    }
    let execution = match trigger {
        Trigger::Cron => {
            let asked = ScheduleAsked {
                cron: body.cron,
                schedule: body.schedule,
                timezone: body.timezone,
                starts_at: body.starts_at,
                ends_at: body.ends_at,
            };
            let plan = plan_cron(state, scope, asked, at).await?;
            job.cron_expression = plan.expression;
            (job.schedule, job.schedule_spec) = plan.schedule.unzip();
            job.cron_timezone = Some(plan.timezone);
            job.cron_starts_at = Some(plan.starts_at);
            job.cron_ends_at = plan.ends_at;
            job.cron_next_run_at = Some(plan.next_run_at);
            None
        }
        Trigger::Immediate | Trigger::Delayed => {
            let run_at = match trigger {
                Trigger::Delayed => {
                    let run_at = delayed_run_at(body.run_at, body.delay_ms, at)?;
                    if run_at > at + state.max_schedule_ahead {
                        return Err(ApiError::invalid_field(
                            "run_at",
                            format!(
                                "is more than {} days ahead (TE_MAX_SCHEDULE_AHEAD_DAYS); schedule it closer or use a CRON job",
                                state.max_schedule_ahead.num_days()
                            ),
                        ));
                    }
                    job.run_at = Some(run_at);
                    run_at
                }
                _ => at,
            };
            if body.expires_at.is_some_and(|expires| expires <= run_at.max(at)) {
                return Err(ApiError::invalid_field(
                    "expires_at",
                    "is not after the job's time (`run_at`, or now): its execution could never start",
                ));
            }
            job.expires_at = body.expires_at;
            // A run_at in the past fires at once.
            let status = if run_at > at { ExecutionStatus::Pending } else { ExecutionStatus::Queued };
            Some(ExecutionWrite::first_of(&job, status, run_at, max_attempts).keyed(endpoint.concurrency.as_ref()))
        }
    };
    Ok(Prepared { new: NewJob { job, execution }, run_at_given })
}

/// Wake the loops that have new work from these creates: the worker for executions claimable
/// now, the promoter for ones that wait, the cron materializer for new cron jobs.
pub(super) async fn wake(state: &AppState, created: &[&Prepared]) {
    let statuses = created.iter().filter_map(|p| p.new.execution.as_ref().map(ExecutionWrite::wakes));
    state.wakeups.executions_written(&state.store, statuses).await;
    if created.iter().any(|p| p.new.execution.is_none()) {
        state.wakeups.cron_job_changed(&state.store).await;
    }
}

/// A DELAYED job's time: `run_at`, or `delay_ms` after `now`; exactly one of them.
fn delayed_run_at(
    run_at: Option<DateTime<Utc>>,
    delay_ms: Option<u64>,
    now: DateTime<Utc>,
) -> ApiResult<DateTime<Utc>> {
    match (run_at, delay_ms) {
        (Some(run_at), None) => Ok(run_at),
        (None, Some(delay)) => i64::try_from(delay)
            .ok()
            .and_then(chrono::Duration::try_milliseconds)
            .and_then(|delay| now.checked_add_signed(delay))
            .ok_or_else(|| ApiError::invalid_field("delay_ms", "is too large")),
        (Some(_), Some(_)) => Err(ApiError::invalid_field("delay_ms", "cannot be given with `run_at`: choose one")),
        (None, None) => Err(ApiError::invalid_field("run_at", "is required for a DELAYED job (or give `delay_ms`)")),
    }
}

/// List jobs, oldest first (or `?order=newest`), filtered by endpoint, status and trigger.
#[utoipa::path(get, path = "/jobs", tag = "jobs", params(JobListParams), responses(
    (status = 200, description = "A page of jobs, oldest first.", body = ListOut<JobOut>),
))]
async fn list(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<JobListParams>,
) -> ApiResult<Json<ListOut<JobOut>>> {
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let page = crate::api::pagination::ListOrder::apply(params.order, page);
    let status = params.status.as_deref().map(str::parse::<JobStatus>).transpose();
    let status = status.map_err(|_| ApiError::invalid_field("status", "must be ACTIVE or RETIRED"))?;
    let trigger = params.trigger.as_deref().map(str::parse::<Trigger>).transpose();
    let trigger = trigger.map_err(|_| ApiError::invalid_field("trigger", "must be IMMEDIATE, DELAYED or CRON"))?;
    let filter = JobFilter {
        tenant: Some(scope.tenant().to_owned()),
        endpoint: scope.stored_opt(params.endpoint.as_deref()),
        status,
        trigger_type: trigger,
    };
    let rows = state.store.job_list(&filter, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |j| PageKey { created_at: j.created_at, key: j.job_id.to_string() },
        |j| JobOut::new(&j, None),
    )))
}

/// The job, if it is the caller's tenant's: another tenant's job is not found, as if it did
/// not exist.
pub(super) async fn load(state: &AppState, scope: &Scope, job_id: &JobId) -> ApiResult<Job> {
    match state.store.job_get(job_id).await? {
        Some(job) if scope.owns(&job.endpoint) => Ok(job),
        _ => Err(not_found(job_id)),
    }
}

/// Read a job.
#[utoipa::path(get, path = "/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), responses(
    (status = 200, description = "The job, with a one-shot job's execution as it is now.", body = JobOut),
))]
async fn read(State(state): State<AppState>, scope: Scope, Path(job_id): Path<JobId>) -> ApiResult<Json<JobOut>> {
    let job = load(&state, &scope, &job_id).await?;
    let execution = if job.trigger_type == Trigger::Cron { None } else { state.store.execution_first(&job_id).await? };
    Ok(Json(JobOut::new(&job, execution.as_ref().map(|e| (e, None)))))
}

/// Update a CRON job: a new version with the changed fields; the old one is retired.
#[utoipa::path(put, path = "/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), request_body = JobUpdateIn, responses(
    (status = 200, description = "The new version; the old one is RETIRED.", body = JobOut),
))]
async fn update(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiJson(body): ApiJson<JobUpdateIn>,
) -> ApiResult<Json<JobOut>> {
    let old = policies::active_cron(&state, &scope, &job_id, "updated. Create a new job instead").await?;
    policies::check_sla(body.sla_ms)?;
    check_callbacks(&state, &scope, body.on_failure.as_deref(), body.on_success.as_deref(), &old.endpoint).await?;
    let endpoint = state.store.endpoint_get(&old.endpoint).await?;
    let input = body.input.unwrap_or_else(|| old.input.clone().unwrap_or_default());
    state.quotas.input_fits(scope.tenant(), &input)?;
    let payload_spec = endpoint.as_ref().and_then(|e| e.payload_spec.as_deref());
    validate_input(&*state.store, &state.validators, payload_spec, &input).await?;
    let at = now();
    // A new cron expression or schedule plugin replaces whichever the job had.
    let (cron, schedule) = match (body.cron, body.schedule) {
        (None, None) => (old.cron_expression.clone(), ScheduleIn::of(&old)),
        given => given,
    };
    let asked = ScheduleAsked {
        cron,
        schedule,
        timezone: Some(body.timezone.or(old.cron_timezone.clone()).unwrap_or_default()),
        starts_at: body.starts_at.or(old.cron_starts_at),
        ends_at: body.ends_at.or(old.cron_ends_at),
    };
    let plan = plan_cron(&state, &scope, asked, at).await?;
    let (schedule, schedule_spec) = plan.schedule.unzip();
    let new = JobWrite {
        version: old.version + 1,
        previous_version_id: Some(old.job_id.clone()),
        // The key belongs to the first version: a repeat of its create still finds it.
        idempotency_key: None,
        input,
        cron_expression: plan.expression,
        cron_timezone: Some(plan.timezone),
        cron_starts_at: Some(plan.starts_at),
        cron_ends_at: plan.ends_at,
        cron_next_run_at: old.paused_at.is_none().then_some(plan.next_run_at),
        // The new version's ticks continue the trace of the request that made it.
        trace_parent: TraceParent::current().map(|t| t.to_string()),
        // A paused job's new version is paused too, from now: resume it to run the schedule.
        paused_at: old.paused_at.map(|_| at),
        overlap_policy: body.overlap_policy.unwrap_or(old.overlap_policy),
        catchup_policy: body.catchup_policy.unwrap_or(old.catchup_policy),
        catchup_window_sec: match body.catchup_window.as_deref() {
            Some(text) => Some(policies::parse_window(text)?),
            None => old.catchup_window_sec,
        },
        cron_jitter_ms: match body.jitter_ms {
            Some(_) => policies::check_jitter(body.jitter_ms)?,
            None => old.cron_jitter_ms,
        },
        sla_ms: body.sla_ms.or(old.sla_ms),
        on_failure: scope.stored_opt(body.on_failure.as_deref()).or(old.on_failure.clone()),
        on_success: scope.stored_opt(body.on_success.as_deref()).or(old.on_success.clone()),
        schedule,
        schedule_spec,
        // A new version is a new job: it is delivered with the endpoint as it is now.
        ..JobWrite::new(
            &old.endpoint,
            endpoint.as_ref().map(|e| e.version).or(old.endpoint_version).unwrap_or(1),
            old.endpoint_type,
            Trigger::Cron,
            at,
        )
    };
    tracing::Span::current().record("job_id", tracing::field::display(&new.job_id));
    let created =
        state.store.job_replace(&job_id, &new).await.map_err(|e| endpoint_gone(e, &new.endpoint))?.ok_or_else(
            || ApiError::new(ErrorCode::JobNotUpdatable, format!("Job '{job_id}' was retired while this update ran.")),
        )?;
    state.wakeups.cron_job_changed(&state.store).await;
    Ok(Json(JobOut::new(&created, None)))
}

/// Cancel a job.
///
/// CRON: retire (in-flight executions run to completion). One-shot: cancel its execution if it
/// has not started; 409 once it is running or done.
#[utoipa::path(post, path = "/jobs/{job_id}/cancel", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), responses(
    (status = 200, description = "The job after the cancel.", body = JobOut),
))]
async fn cancel(State(state): State<AppState>, scope: Scope, Path(job_id): Path<JobId>) -> ApiResult<Json<JobOut>> {
    let job = load(&state, &scope, &job_id).await?;
    if job.trigger_type == Trigger::Cron {
        state.store.job_retire(&job_id).await?;
        return Ok(Json(JobOut::new(&load(&state, &scope, &job_id).await?, None)));
    }
    state.store.job_cancel_waiting(&job_id).await?;
    let execution = state.store.execution_first(&job_id).await?;
    match execution.as_ref().map(|e| e.status) {
        Some(ExecutionStatus::Running) => Err(ApiError::new(
            ErrorCode::ExecutionNotCancellable,
            format!("Job '{job_id}' is being delivered right now and cannot be cancelled."),
        )),
        Some(done @ (ExecutionStatus::Success | ExecutionStatus::Failed)) => {
            Err(ApiError::new(ErrorCode::ExecutionNotCancellable, format!("Job '{job_id}' already finished ({done}).")))
        }
        _ => Ok(Json(JobOut::new(&load(&state, &scope, &job_id).await?, execution.as_ref().map(|e| (e, None))))),
    }
}

/// Delete a job with its executions, their attempts and logs.
///
/// Refused while the job has an unfinished execution (cancel it, or wait), and for an active
/// CRON job (cancel it first: that stops its schedule). Other versions of a cron job stay.
#[utoipa::path(delete, path = "/jobs/{job_id}", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), responses(
    (status = 204, description = "Deleted, with its history."),
))]
async fn delete(State(state): State<AppState>, scope: Scope, Path(job_id): Path<JobId>) -> ApiResult<StatusCode> {
    let job = load(&state, &scope, &job_id).await?;
    if job.trigger_type == Trigger::Cron && job.status == JobStatus::Active {
        return Err(ApiError::conflict(format!(
            "Job '{job_id}' is an active CRON job: cancel it first (POST /jobs/{job_id}/cancel), then delete it."
        )));
    }
    match state.store.job_delete(&job_id).await? {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT),
        Deleted::NotFound => Err(not_found(&job_id)),
        Deleted::InUse(executions) => Err(ApiError::conflict(format!(
            "Job '{job_id}' has unfinished executions: {}. Cancel them or wait for them to finish, then delete it.",
            executions.join(", ")
        ))),
    }
}

/// List a job's versions.
///
/// Every version of the job's lineage, oldest first, whichever version is asked for.
#[utoipa::path(get, path = "/jobs/{job_id}/versions", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`)."), ListParams), responses(
    (status = 200, description = "Every version of the job's lineage, oldest first.", body = ListOut<JobOut>),
))]
async fn versions(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<JobOut>>> {
    let page = params.page_request()?;
    load(&state, &scope, &job_id).await?;
    let rows = state.store.job_versions(&job_id, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |j| PageKey { created_at: j.created_at, key: j.job_id.to_string() },
        |j| JobOut::new(&j, None),
    )))
}

/// List a job's executions, oldest first (or `?order=newest`; `?status=` filters).
#[utoipa::path(get, path = "/jobs/{job_id}/executions", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`)."), ExecutionListParams), responses(
    (status = 200, description = "A page of the job's executions, oldest first.", body = ListOut<ExecutionOut>),
))]
async fn executions(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
    ApiQuery(params): ApiQuery<ExecutionListParams>,
) -> ApiResult<Json<ListOut<ExecutionOut>>> {
    load(&state, &scope, &job_id).await?;
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let page = crate::api::pagination::ListOrder::apply(params.order, page);
    let status = params.status.as_deref().map(str::parse::<ExecutionStatus>).transpose();
    let status = status.map_err(|e| ApiError::invalid_field("status", format!("must be one of {}", e.expected)))?;
    let rows = state.store.execution_list(&job_id, status, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |e| PageKey { created_at: e.created_at, key: e.execution_id.to_string() },
        ExecutionOut::from,
    )))
}
