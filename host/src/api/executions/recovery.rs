//! Dead letters and replay: `GET /executions` across jobs (`?status=FAILED` is the dead-letter
//! view), `POST /executions/{id}/retry` and `POST /executions/replay`.
//!
//! A retry is a new execution of the same job, naming the one it retries (`retry_of`), which
//! stays as the record. It is keyed `retry:{old execution id}` in the job, so an execution is
//! retried at most once however often or by whom it is asked (a retry that fails in turn is
//! a FAILED execution of its own, and may be retried). It is delivered with the endpoint as it
//! is now, so a fix to the endpoint (a URL, a secret, a retry policy) applies to the retry, and
//! it waits in QUEUED like any execution: the worker's fair shares and the endpoint's
//! `max_concurrency` apply to replays as to everything else.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{load, not_found, ExecutionOut};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::extract::{ApiJson, ApiQuery};
use crate::api::pagination::{paginate, ListOut, ListParams};
use crate::api::state::AppState;
use crate::api::Created;
use crate::domain::{ExecutionStatus, Scope, TriggerReason};
use crate::ids::ExecutionId;
use crate::retry::RetryPolicy;
use crate::store::{
    now, Endpoint, Execution, ExecutionFilter, ExecutionWrite, Inserted, PageKey, StoreError, RETRY_KEY_PREFIX,
};
use crate::trace::TraceParent;

/// The most executions one replay queues.
pub const MAX_REPLAY: u32 = 1000;
const DEFAULT_REPLAY: u32 = 100;

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExecutionSearchParams {
    /// Only executions with this status (`PENDING`, `QUEUED`, `RUNNING`, `RETRYING`, `SUCCESS`,
    /// `FAILED`, `CANCELLED`). `FAILED` is the dead-letter view.
    pub status: Option<String>,
    /// Only executions of this endpoint.
    pub endpoint: Option<String>,
    /// Only executions of this job.
    pub job_id: Option<String>,
    /// Only executions created at or after this time (RFC 3339; write `+` in an offset as `%2B`).
    pub created_after: Option<DateTime<Utc>>,
    /// Only executions created before this time (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// Items per page: 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// The `cursor` of the previous page (pass the same filters again).
    pub cursor: Option<String>,
    /// `oldest` (the default) or `newest` first.
    pub order: Option<crate::api::pagination::ListOrder>,
}

/// `POST /executions/replay`: which failed (or cancelled) executions to retry.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayIn {
    /// `FAILED` (the default) or `CANCELLED`.
    pub status: Option<ExecutionStatus>,
    pub endpoint: Option<String>,
    pub job_id: Option<String>,
    /// Only executions created at or after this time (RFC 3339).
    pub created_after: Option<DateTime<Utc>>,
    /// Only executions created before this time (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// The most executions to retry in this request: 1–1000, default 100. Oldest first; those
    /// retried before are passed over, so repeating the request takes the next ones.
    pub limit: Option<u32>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReplayOut {
    /// How many new executions were queued.
    pub queued: usize,
    /// The new executions, each retrying one that matched.
    pub execution_ids: Vec<ExecutionId>,
}

fn status_param(status: Option<&str>) -> ApiResult<Option<ExecutionStatus>> {
    status.map(str::parse::<ExecutionStatus>).transpose().map_err(|_| {
        ApiError::invalid_field("status", "must be PENDING, QUEUED, RUNNING, RETRYING, SUCCESS, FAILED or CANCELLED")
    })
}

fn check_range(after: Option<DateTime<Utc>>, before: Option<DateTime<Utc>>) -> ApiResult<()> {
    match (after, before) {
        (Some(a), Some(b)) if a >= b => {
            Err(ApiError::invalid_field("created_before", "must be later than `created_after`"))
        }
        _ => Ok(()),
    }
}

/// List executions across jobs, oldest first (or `?order=newest`), by status, endpoint, job and creation time.
///
/// `?status=FAILED` is the dead-letter view: every execution that ran out of attempts or failed
/// for good, whichever job it belongs to.
#[utoipa::path(get, path = "/executions", tag = "executions", params(ExecutionSearchParams), responses(
    (status = 200, description = "A page of executions, oldest first.", body = ListOut<ExecutionOut>),
))]
pub(super) async fn search(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<ExecutionSearchParams>,
) -> ApiResult<Json<ListOut<ExecutionOut>>> {
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let page = crate::api::pagination::ListOrder::apply(params.order, page);
    check_range(params.created_after, params.created_before)?;
    let filter = ExecutionFilter {
        status: status_param(params.status.as_deref())?,
        endpoint: scope.stored_opt(params.endpoint.as_deref()),
        job_id: params.job_id,
        created_after: params.created_after,
        created_before: params.created_before,
        tenant: Some(scope.tenant().to_owned()),
    };
    let rows = state.store.execution_search(&filter, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |e| PageKey { created_at: e.created_at, key: e.execution_id.to_string() },
        ExecutionOut::from,
    )))
}

/// Retry a FAILED or CANCELLED execution: a new execution of the same job.
///
/// The new execution (`retry_of` names the old one, which stays as the record) is QUEUED now
/// and delivered with the endpoint as it is now. An execution is retried at most once: asking
/// again answers `200` with the same retry.
#[utoipa::path(post, path = "/executions/{execution_id}/retry", tag = "executions", params(("execution_id" = String, Path, description = "The execution's id (`exec_…`).")), responses(
    (status = 201, description = "The new execution, QUEUED.", body = ExecutionOut),
    (status = 200, description = "This execution was retried before: that retry.", body = ExecutionOut),
))]
pub(super) async fn retry(
    State(state): State<AppState>,
    scope: Scope,
    Path(id): Path<ExecutionId>,
) -> ApiResult<Created<ExecutionOut>> {
    let execution = load(&state, &scope, &id).await?;
    if !matches!(execution.status, ExecutionStatus::Failed | ExecutionStatus::Cancelled) {
        return Err(ApiError::new(
            ErrorCode::ExecutionNotRetryable,
            format!("Execution '{id}' is {}; only FAILED and CANCELLED executions can be retried.", execution.status),
        ));
    }
    let endpoint = state.store.endpoint_get(&execution.endpoint).await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::EndpointNotFound,
            format!("Endpoint '{}' of execution '{id}' no longer exists.", scope.shown(&execution.endpoint)),
        )
    })?;
    let write = retry_of(&execution, &endpoint, TraceParent::current().map(|t| t.to_string()));
    // One write in, one answer out.
    let stored = state.store.execution_insert_many(std::slice::from_ref(&write)).await?.pop();
    // None: its job (and so this execution) was deleted while the retry was made.
    let (status, retried) = match stored.ok_or(StoreError::UniqueViolation)?.ok_or_else(|| not_found(&id))? {
        Inserted::Created(e) => (StatusCode::CREATED, e),
        Inserted::Existing(e) => (StatusCode::OK, e),
    };
    if status == StatusCode::CREATED {
        state.wakeups.work_ready(&state.store).await;
    }
    Ok(Created(status, retried.into()))
}

/// Retry, in bulk, the FAILED (or CANCELLED) executions a filter matches.
///
/// Up to `limit` matching executions that were not retried before, oldest first, each get a
/// retry as `POST /executions/{id}/retry` would make it, all in one transaction. Repeating the
/// request never retries an execution twice: it takes the next ones, and answers `queued: 0`
/// once none is left.
#[utoipa::path(post, path = "/executions/replay", tag = "executions", request_body = ReplayIn, responses(
    (status = 200, description = "How many executions were queued, and their ids.", body = ReplayOut),
))]
pub(super) async fn replay(
    State(state): State<AppState>,
    scope: Scope,
    ApiJson(body): ApiJson<ReplayIn>,
) -> ApiResult<Json<ReplayOut>> {
    let status = body.status.unwrap_or(ExecutionStatus::Failed);
    if !matches!(status, ExecutionStatus::Failed | ExecutionStatus::Cancelled) {
        return Err(ApiError::invalid_field("status", "must be FAILED or CANCELLED: only those can be replayed"));
    }
    let limit = body.limit.unwrap_or(DEFAULT_REPLAY);
    if !(1..=MAX_REPLAY).contains(&limit) {
        return Err(ApiError::invalid_field("limit", format!("must be between 1 and {MAX_REPLAY}, got {limit}")));
    }
    check_range(body.created_after, body.created_before)?;
    if let Some(name) = &body.endpoint {
        if state.store.endpoint_get(&scope.stored(name)).await?.is_none() {
            return Err(ApiError::new(ErrorCode::EndpointNotFound, format!("Endpoint '{name}' does not exist.")));
        }
    }
    let filter = ExecutionFilter {
        status: Some(status),
        endpoint: scope.stored_opt(body.endpoint.as_deref()),
        job_id: body.job_id,
        created_after: body.created_after,
        created_before: body.created_before,
        tenant: Some(scope.tenant().to_owned()),
    };
    let candidates = state.store.execution_unretried(&filter, i64::from(limit)).await?;
    let trace = TraceParent::current().map(|t| t.to_string());
    let mut endpoints: HashMap<String, Option<Endpoint>> = HashMap::new();
    let mut writes = Vec::with_capacity(candidates.len());
    for execution in &candidates {
        if !endpoints.contains_key(&execution.endpoint) {
            let endpoint = state.store.endpoint_get(&execution.endpoint).await?;
            endpoints.insert(execution.endpoint.clone(), endpoint);
        }
        // An execution whose endpoint was deleted has nothing to be delivered to: left as is.
        if let Some(endpoint) = &endpoints[&execution.endpoint] {
            writes.push(retry_of(execution, endpoint, trace.clone()));
        }
    }
    let stored = state.store.execution_insert_many(&writes).await?;
    let execution_ids: Vec<ExecutionId> = stored
        .into_iter()
        .filter_map(|s| match s {
            Some(Inserted::Created(e)) => Some(e.execution_id),
            Some(Inserted::Existing(_)) | None => None,
        })
        .collect();
    if !execution_ids.is_empty() {
        state.wakeups.work_ready(&state.store).await;
    }
    Ok(Json(ReplayOut { queued: execution_ids.len(), execution_ids }))
}

/// The retry of `execution`: same job, input and trigger; the endpoint as it is now.
fn retry_of(execution: &Execution, endpoint: &Endpoint, trace_parent: Option<String>) -> ExecutionWrite {
    let at = now();
    ExecutionWrite {
        execution_id: ExecutionId::new(),
        job_id: execution.job_id.clone(),
        endpoint: endpoint.name.clone(),
        endpoint_version: Some(endpoint.version),
        endpoint_type: endpoint.endpoint_type,
        idempotency_key: Some(format!("{RETRY_KEY_PREFIX}{}", execution.execution_id)),
        status: ExecutionStatus::Queued,
        input: execution.input.clone().unwrap_or_default(),
        max_attempts: RetryPolicy::attempts_allowed(&endpoint.retry_policy),
        run_at: at,
        created_at: at,
        trace_parent,
        retry_of: Some(execution.execution_id.clone()),
        overlap_policy: None,
        sla_ms: execution.sla_ms,
        trigger_reason: Some(TriggerReason::Retry),
        // A retry is asked for now: the job's expiry was for its first fire.
        expires_at: None,
        on_success: execution.on_success.clone(),
        concurrency_key: None,
        concurrency_limit: None,
    }
    .keyed(endpoint.concurrency.as_ref())
}
