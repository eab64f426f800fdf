//! `/jobs`: invocations of an endpoint — now (IMMEDIATE), later (DELAYED), or on a schedule
//! (CRON). Jobs are immutable; a cron job is "updated" by a new version that retires the old.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use serde::Deserialize;
use serde_json::{json, Value};

use super::executions::ExecutionOut;
use super::extract::{ApiJson, ApiQuery};
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::Created;
pub use crate::domain::Trigger;
use crate::domain::{ExecutionStatus, JobStatus};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::ids::{new_id, EXECUTION, JOB};
use crate::retry::RetryPolicy;
use crate::scheduler::schedule::CronSchedule;
use crate::store::{now, Execution, ExecutionWrite, Inserted, Job, JobFilter, JobWrite, PageKey};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/jobs", post(create).get(list))
        .route("/jobs/{job_id}", get(read).put(update))
        .route("/jobs/{job_id}/cancel", post(cancel))
        .route("/jobs/{job_id}/status", get(status))
        .route("/jobs/{job_id}/versions", get(versions))
        .route("/jobs/{job_id}/executions", get(executions))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobIn {
    pub endpoint: String,
    pub trigger: Trigger,
    pub idempotency_key: Option<String>,
    pub input: Option<Value>,
    pub run_at: Option<DateTime<Utc>>,
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

/// `PUT /jobs/{id}`: what changes in the cron job's next version; absent fields carry over.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobUpdateIn {
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub input: Option<Value>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobListParams {
    pub endpoint: Option<String>,
    pub status: Option<String>,
    pub trigger: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionListParams {
    pub status: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

/// The longest key a client may choose.
const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

fn not_found(job_id: &str) -> ApiError {
    ApiError::new(ErrorCode::JobNotFound, format!("Job with ID '{job_id}' does not exist."))
}

fn utc(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// A cron time in the job's own timezone, as the brief shows `next_run_at`.
fn local(t: &DateTime<Utc>, timezone: Option<&str>) -> String {
    match timezone.and_then(|tz| tz.parse::<Tz>().ok()) {
        Some(tz) => t.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Secs, false),
        None => utc(t),
    }
}

/// The status a one-shot job's execution was created with (what a create, and its idempotent
/// repeats, answer), derived from the job so every repeat shows the same body.
fn initial_status(job: &Job) -> ExecutionStatus {
    match job.run_at {
        Some(run_at) if job.trigger_type == Trigger::Delayed && run_at > job.created_at => ExecutionStatus::Pending,
        _ => ExecutionStatus::Queued,
    }
}

/// A job as the API shows it. `execution` is the one-shot job's execution: at creation (for
/// creates) or as it is now (for reads).
pub fn job_out(job: &Job, execution: Option<(&Execution, Option<ExecutionStatus>)>) -> Value {
    let mut out = json!({
        "job_id": job.job_id,
        "endpoint": job.endpoint,
        "endpoint_version": job.endpoint_version,
        "endpoint_type": job.endpoint_type,
        "trigger": job.trigger_type,
        "status": job.status,
        "version": job.version,
        "idempotency_key": job.idempotency_key,
        "input": job.input.clone().unwrap_or_default(),
        "created_at": utc(&job.created_at),
    });
    if let Some(retired_at) = &job.retired_at {
        out["retired_at"] = json!(utc(retired_at));
    }
    if let Some(run_at) = &job.run_at {
        out["run_at"] = json!(utc(run_at));
    }
    if let Some((execution, status)) = execution {
        out["execution"] = json!({
            "execution_id": execution.execution_id,
            "status": status.unwrap_or(execution.status),
            "created_at": utc(&execution.created_at),
        });
    }
    if job.trigger_type == Trigger::Cron {
        let tz = job.cron_timezone.as_deref();
        out["cron"] = json!(job.cron_expression);
        out["timezone"] = json!(job.cron_timezone);
        out["starts_at"] = json!(job.cron_starts_at.as_ref().map(utc));
        out["ends_at"] = json!(job.cron_ends_at.as_ref().map(utc));
        let (next, last) = cron_ticks(job);
        out["next_run_at"] = json!(next.as_ref().map(|t| local(t, tz)));
        out["last_tick_at"] = json!(last.as_ref().map(|t| local(t, tz)));
        out["previous_version_id"] = json!(job.previous_version_id);
        out["replaced_by_id"] = json!(job.replaced_by_id);
    }
    out
}

/// A cron job's next and last tick as a user means them. The scheduler materializes a tick
/// ahead of its time, so the stored last tick may still be waiting: then it is the next tick,
/// and the one before it the last (a retired job's waiting tick was cancelled, so it is neither).
fn cron_ticks(job: &Job) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    match job.cron_last_tick_at {
        Some(waiting) if waiting > now() => {
            let next = if job.status == JobStatus::Active { Some(waiting) } else { job.cron_next_run_at };
            (next, job.cron_prev_tick_at)
        }
        last => (job.cron_next_run_at, last),
    }
}

/// Check `input` against the endpoint's payload spec; 422 listing every failing path.
async fn validate_input(state: &AppState, payload_spec: Option<&str>, input: &Value) -> ApiResult<()> {
    let Some(name) = payload_spec else { return Ok(()) };
    let Some(spec) = state.store.payload_spec_get(name).await? else { return Ok(()) };
    let validator = state.validators.get(name, spec.updated_at, &spec.schema)?;
    let failures: Vec<Value> = validator
        .iter_errors(input)
        .map(|e| {
            let path = e.instance_path.to_string();
            json!({ "path": if path.is_empty() { "/".to_owned() } else { path }, "message": e.to_string() })
        })
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    let summary: Vec<String> = failures
        .iter()
        .map(|f| format!("{}: {}", f["path"].as_str().unwrap_or(""), f["message"].as_str().unwrap_or("")))
        .collect();
    Err(ApiError::new(
        ErrorCode::InputValidationFailed,
        format!("`input` does not match payload spec '{name}': {}", summary.join("; ")),
    )
    .with_details(json!(failures)))
}

/// A compiled validator and the `updated_at` of the spec it was compiled from.
type CompiledSpec = (DateTime<Utc>, Arc<jsonschema::Validator>);

/// Compiled payload-spec validators, keyed by spec name and its `updated_at`.
#[derive(Default)]
pub struct Validators {
    compiled: Mutex<HashMap<String, CompiledSpec>>,
}

impl Validators {
    fn get(&self, name: &str, updated_at: DateTime<Utc>, schema: &Value) -> ApiResult<Arc<jsonschema::Validator>> {
        if let Some((at, validator)) = self.compiled.lock().expect("validator cache lock").get(name) {
            if *at == updated_at {
                return Ok(validator.clone());
            }
        }
        let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| {
            ApiError::new(ErrorCode::InvalidSchema, format!("payload spec '{name}' no longer compiles: {e}"))
        })?);
        self.compiled.lock().expect("validator cache lock").insert(name.to_owned(), (updated_at, validator.clone()));
        Ok(validator)
    }
}

/// A parsed cron job schedule and its first tick.
struct CronPlan {
    expression: String,
    timezone: String,
    starts_at: DateTime<Utc>,
    ends_at: Option<DateTime<Utc>>,
    next_run_at: DateTime<Utc>,
}

fn plan_cron(
    expression: Option<String>,
    timezone: Option<String>,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> ApiResult<CronPlan> {
    let expression = expression.ok_or_else(|| ApiError::invalid_field("cron", "is required for a CRON job"))?;
    let timezone = timezone.ok_or_else(|| {
        ApiError::invalid_field("timezone", "is required for a CRON job (an IANA name such as `UTC`)")
    })?;
    let schedule =
        CronSchedule::parse(&expression, &timezone).map_err(|e| ApiError::new(ErrorCode::InvalidCron, e.0))?;
    let starts_at = starts_at.unwrap_or(at);
    if let Some(end) = ends_at {
        if end <= starts_at {
            return Err(ApiError::invalid_field("ends_at", "must be after starts_at"));
        }
    }
    // The first tick at or after the later of starts_at and now.
    let from = starts_at.max(at) - chrono::Duration::milliseconds(1);
    let next_run_at = schedule.next_after(from).filter(|t| ends_at.is_none_or(|end| *t < end)).ok_or_else(|| {
        ApiError::new(ErrorCode::InvalidCron, format!("`{expression}` has no tick between starts_at and ends_at"))
    })?;
    Ok(CronPlan { expression, timezone, starts_at, ends_at, next_run_at })
}

async fn create(State(state): State<AppState>, ApiJson(body): ApiJson<JobIn>) -> ApiResult<Created<Value>> {
    let endpoint = state.store.endpoint_get(&body.endpoint).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::EndpointNotFound, format!("Endpoint '{}' does not exist.", body.endpoint))
    })?;
    let trigger = body.trigger;
    let refuse = |field: &str, present: bool| {
        if present {
            Err(ApiError::invalid_field(field, format!("does not apply to a {} job", trigger.as_str())))
        } else {
            Ok(())
        }
    };
    if trigger != Trigger::Cron {
        refuse("cron", body.cron.is_some())?;
        refuse("timezone", body.timezone.is_some())?;
        refuse("starts_at", body.starts_at.is_some())?;
        refuse("ends_at", body.ends_at.is_some())?;
    }
    if trigger != Trigger::Delayed {
        refuse("run_at", body.run_at.is_some())?;
    }
    match &body.idempotency_key {
        None if trigger != Trigger::Cron => {
            return Err(ApiError::invalid_field(
                "idempotency_key",
                format!("is required for a {} job", trigger.as_str()),
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
    let input = body.input.unwrap_or_else(|| json!({}));
    validate_input(&state, endpoint.payload_spec.as_deref(), &input).await?;

    let at = now();
    let max_attempts = RetryPolicy::parse(Some(&endpoint.retry_policy)).map(|p| p.max_attempts as i32).unwrap_or(1);
    let job_id = new_id(JOB);
    let mut job = JobWrite {
        job_id: job_id.clone(),
        endpoint: endpoint.name.clone(),
        endpoint_version: endpoint.version,
        endpoint_type: endpoint.endpoint_type,
        trigger_type: trigger,
        version: 1,
        previous_version_id: None,
        idempotency_key: body.idempotency_key.clone(),
        input: input.clone(),
        run_at: None,
        cron_expression: None,
        cron_timezone: None,
        cron_starts_at: None,
        cron_ends_at: None,
        cron_next_run_at: None,
        created_at: at,
    };
    let execution = match trigger {
        Trigger::Cron => {
            let plan = plan_cron(body.cron, body.timezone, body.starts_at, body.ends_at, at)?;
            job.cron_expression = Some(plan.expression);
            job.cron_timezone = Some(plan.timezone);
            job.cron_starts_at = Some(plan.starts_at);
            job.cron_ends_at = plan.ends_at;
            job.cron_next_run_at = Some(plan.next_run_at);
            None
        }
        Trigger::Immediate | Trigger::Delayed => {
            let run_at = match trigger {
                Trigger::Delayed => {
                    let run_at = body
                        .run_at
                        .ok_or_else(|| ApiError::invalid_field("run_at", "is required for a DELAYED job"))?;
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
            Some(ExecutionWrite {
                execution_id: new_id(EXECUTION),
                job_id: job_id.clone(),
                endpoint: endpoint.name.clone(),
                endpoint_version: Some(endpoint.version),
                endpoint_type: endpoint.endpoint_type,
                idempotency_key: body.idempotency_key.clone(),
                // A run_at in the past fires at once.
                status: if run_at > at { ExecutionStatus::Pending } else { ExecutionStatus::Queued },
                input,
                max_attempts,
                run_at,
                created_at: at,
            })
        }
    };

    let inserted = state.store.job_insert(&job, execution.as_ref()).await?;
    let (status, job, first) = match inserted {
        Inserted::Created(job) => {
            match execution.as_ref().map(|e| e.status) {
                Some(ExecutionStatus::Queued) => state.wakeups.work_ready(&state.store).await,
                Some(_) => state.wakeups.pending_changed.notify_one(),
                None => state.wakeups.cron_changed.notify_one(),
            }
            // The execution just written is the job's first: no need to read it back.
            let first = execution.map(|e| Execution {
                execution_id: e.execution_id,
                job_id: e.job_id,
                endpoint: e.endpoint,
                endpoint_version: e.endpoint_version,
                endpoint_type: e.endpoint_type,
                idempotency_key: e.idempotency_key,
                status: e.status,
                input: Some(e.input),
                output: None,
                attempt_count: 0,
                max_attempts: e.max_attempts,
                worker_id: None,
                run_at: e.run_at,
                started_at: None,
                completed_at: None,
                lease_expires_at: None,
                duration_ms: None,
                created_at: e.created_at,
            });
            (StatusCode::CREATED, job, first)
        }
        Inserted::Existing(job) => {
            let first = state.store.execution_first(&job.job_id).await?;
            (StatusCode::OK, job, first)
        }
    };
    let created_status = initial_status(&job);
    Ok(Created(status, job_out(&job, first.as_ref().map(|e| (e, Some(created_status))))))
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<JobListParams>,
) -> ApiResult<Json<ListOut<Value>>> {
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let status = params.status.as_deref().map(str::parse::<JobStatus>).transpose();
    let status = status.map_err(|_| ApiError::invalid_field("status", "must be ACTIVE or RETIRED"))?;
    let trigger = params.trigger.as_deref().map(str::parse::<Trigger>).transpose();
    let trigger = trigger.map_err(|_| ApiError::invalid_field("trigger", "must be IMMEDIATE, DELAYED or CRON"))?;
    let filter = JobFilter { endpoint: params.endpoint, status, trigger_type: trigger };
    let rows = state.store.job_list(&filter, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |j| PageKey { created_at: j.created_at, key: j.job_id.clone() },
        |j| job_out(&j, None),
    )))
}

async fn load(state: &AppState, job_id: &str) -> ApiResult<Job> {
    state.store.job_get(job_id).await?.ok_or_else(|| not_found(job_id))
}

async fn read(State(state): State<AppState>, Path(job_id): Path<String>) -> ApiResult<Json<Value>> {
    let job = load(&state, &job_id).await?;
    let execution = if job.trigger_type == Trigger::Cron { None } else { state.store.execution_first(&job_id).await? };
    Ok(Json(job_out(&job, execution.as_ref().map(|e| (e, None)))))
}

async fn update(
    State(state): State<AppState>,
    Path(job_id): Path<String>,
    ApiJson(body): ApiJson<JobUpdateIn>,
) -> ApiResult<Json<Value>> {
    let old = load(&state, &job_id).await?;
    if old.trigger_type != Trigger::Cron {
        return Err(ApiError::new(
            ErrorCode::JobNotUpdatable,
            format!(
                "Job '{job_id}' is a {} job; only CRON jobs can be updated. Create a new job instead.",
                old.trigger_type
            ),
        ));
    }
    if old.status != JobStatus::Active {
        let latest =
            old.replaced_by_id.as_deref().map(|id| format!(" Its newer version is '{id}'.")).unwrap_or_default();
        return Err(ApiError::new(ErrorCode::JobNotUpdatable, format!("Job '{job_id}' is retired.{latest}")));
    }
    let endpoint = state.store.endpoint_get(&old.endpoint).await?;
    let input = body.input.unwrap_or_else(|| old.input.clone().unwrap_or_default());
    validate_input(&state, endpoint.as_ref().and_then(|e| e.payload_spec.as_deref()), &input).await?;
    let at = now();
    let plan = plan_cron(
        Some(body.cron.or(old.cron_expression.clone()).unwrap_or_default()),
        Some(body.timezone.or(old.cron_timezone.clone()).unwrap_or_default()),
        body.starts_at.or(old.cron_starts_at),
        body.ends_at.or(old.cron_ends_at),
        at,
    )?;
    let new = JobWrite {
        job_id: new_id(JOB),
        endpoint: old.endpoint.clone(),
        // A new version is a new job: it is delivered with the endpoint as it is now.
        endpoint_version: endpoint.as_ref().map(|e| e.version).or(old.endpoint_version).unwrap_or(1),
        endpoint_type: old.endpoint_type,
        trigger_type: Trigger::Cron,
        version: old.version + 1,
        previous_version_id: Some(old.job_id.clone()),
        // The key belongs to the first version: a repeat of its create still finds it.
        idempotency_key: None,
        input,
        run_at: None,
        cron_expression: Some(plan.expression),
        cron_timezone: Some(plan.timezone),
        cron_starts_at: Some(plan.starts_at),
        cron_ends_at: plan.ends_at,
        cron_next_run_at: Some(plan.next_run_at),
        created_at: at,
    };
    let created = state.store.job_replace(&job_id, &new).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::JobNotUpdatable, format!("Job '{job_id}' was retired while this update ran."))
    })?;
    state.wakeups.cron_changed.notify_one();
    Ok(Json(job_out(&created, None)))
}

/// CRON: retire (in-flight executions run to completion). One-shot: cancel its execution if it
/// has not started; 409 once it is running or done.
async fn cancel(State(state): State<AppState>, Path(job_id): Path<String>) -> ApiResult<Json<Value>> {
    let job = load(&state, &job_id).await?;
    if job.trigger_type == Trigger::Cron {
        state.store.job_retire(&job_id).await?;
        return Ok(Json(job_out(&load(&state, &job_id).await?, None)));
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
        _ => Ok(Json(job_out(&load(&state, &job_id).await?, execution.as_ref().map(|e| (e, None))))),
    }
}

/// Health thresholds over the last 24 hours of completed executions.
pub fn health(total: usize, failed: usize) -> &'static str {
    if total == 0 {
        return "IDLE";
    }
    let failure_rate = failed as f64 / total as f64;
    if failure_rate < 0.10 {
        "HEALTHY"
    } else if failure_rate < 0.50 {
        "DEGRADED"
    } else {
        "FAILING"
    }
}

async fn status(State(state): State<AppState>, Path(job_id): Path<String>) -> ApiResult<Json<Value>> {
    let job = load(&state, &job_id).await?;
    let stats = state.store.job_stats(&job_id, now() - chrono::Duration::hours(24)).await?;
    let last = state.store.execution_last(&job_id).await?;
    let failed = usize::try_from(stats.failed).unwrap_or(0);
    let total = failed + usize::try_from(stats.succeeded).unwrap_or(0);
    let avg = stats.avg_duration_ms.map(|a| a.round() as i64);
    // Over the newest completions (at most JobStats::SAMPLE), so the work is bounded.
    let mut durations = stats.recent_durations;
    durations.sort_unstable();
    let p99 = durations.get(((durations.len() as f64 - 1.0) * 0.99).round().max(0.0) as usize).map(|d| i64::from(*d));
    let pending = stats.pending + stats.queued + stats.retrying;
    let mut out = json!({
        "job_id": job.job_id,
        "endpoint": job.endpoint,
        "endpoint_type": job.endpoint_type,
        "trigger": job.trigger_type,
        "status": job.status,
        "health": health(total, failed),
        "version": job.version,
        "last_execution": last.map(|e| json!({
            "execution_id": e.execution_id,
            "status": e.status,
            "started_at": e.started_at.as_ref().map(utc),
            "completed_at": e.completed_at.as_ref().map(utc),
            "attempt_number": e.attempt_count,
        })),
        "active_executions": { "pending": pending, "running": stats.running, "total": pending + stats.running },
        "stats": { "last_24h": {
            "total": total, "succeeded": total - failed, "failed": failed,
            "avg_duration_ms": avg, "p99_duration_ms": p99,
        }},
    });
    if job.trigger_type == Trigger::Cron {
        let tz = job.cron_timezone.as_deref();
        let (next, last) = cron_ticks(&job);
        out["cron"] = json!({
            "expression": job.cron_expression,
            "timezone": job.cron_timezone,
            "next_run_at": next.as_ref().map(|t| local(t, tz)),
            "last_tick_at": last.as_ref().map(|t| local(t, tz)),
        });
    }
    Ok(Json(out))
}

/// Every version of the job's lineage, oldest first, whichever version is asked for.
async fn versions(
    State(state): State<AppState>,
    Path(job_id): Path<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<Value>>> {
    let page = params.page_request()?;
    load(&state, &job_id).await?;
    let rows = state.store.job_versions(&job_id, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |j| PageKey { created_at: j.created_at, key: j.job_id.clone() },
        |j| job_out(&j, None),
    )))
}

async fn executions(
    State(state): State<AppState>,
    Path(job_id): Path<String>,
    ApiQuery(params): ApiQuery<ExecutionListParams>,
) -> ApiResult<Json<ListOut<ExecutionOut>>> {
    load(&state, &job_id).await?;
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let status = params.status.as_deref().map(str::parse::<ExecutionStatus>).transpose();
    let status = status.map_err(|e| ApiError::invalid_field("status", format!("must be one of {}", e.expected)))?;
    let rows = state.store.execution_list(&job_id, status, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |e| PageKey { created_at: e.created_at, key: e.execution_id.clone() },
        ExecutionOut::from,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_thresholds() {
        assert_eq!(health(0, 0), "IDLE");
        assert_eq!(health(100, 9), "HEALTHY");
        assert_eq!(health(100, 10), "DEGRADED");
        assert_eq!(health(100, 49), "DEGRADED");
        assert_eq!(health(100, 50), "FAILING");
    }

    #[test]
    fn cron_plan_first_tick_and_bounds() {
        let at = DateTime::parse_from_rfc3339("2026-03-15T10:00:00Z").unwrap().with_timezone(&Utc);
        let plan = plan_cron(Some("0 9 * * MON".into()), Some("Asia/Kolkata".into()), Some(at), None, at).ok().unwrap();
        assert_eq!(local(&plan.next_run_at, Some("Asia/Kolkata")), "2026-03-16T09:00:00+05:30");
        let err = plan_cron(
            Some("0 9 * * MON".into()),
            Some("UTC".into()),
            Some(at),
            Some(at + chrono::Duration::hours(1)),
            at,
        )
        .err()
        .unwrap();
        assert_eq!(err.code, ErrorCode::InvalidCron);
        assert_eq!(plan_cron(None, Some("UTC".into()), None, None, at).err().unwrap().status(), 400);
    }
}
