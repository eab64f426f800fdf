//! `/executions`: the fires of a job, their attempts and their logs; across jobs, the
//! dead-letter view and replay (`recovery`).

mod cancel;
mod recovery;

use axum::extract::{Path, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::ApiQuery;
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::{optional_timestamp, timestamp};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::tenant::own_name;
use crate::domain::Scope;
use crate::ids::ExecutionId;
use crate::store::{Attempt, Execution, ExecutionLog, PageKey};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(recovery::search))
        .routes(routes!(recovery::replay))
        .routes(routes!(read))
        .routes(routes!(cancel::cancel))
        .routes(routes!(recovery::retry))
        .routes(routes!(attempts))
        .routes(routes!(logs))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ExecutionOut {
    pub execution_id: crate::ids::ExecutionId,
    pub job_id: crate::ids::JobId,
    /// The tenant it belongs to (its endpoint's).
    pub tenant: String,
    pub endpoint: String,
    /// The endpoint version it is delivered with (its job's).
    pub endpoint_version: Option<i32>,
    pub endpoint_type: crate::domain::EndpointType,
    pub status: crate::domain::ExecutionStatus,
    pub idempotency_key: Option<String>,
    pub input: Option<Value>,
    /// The receipt of the successful attempt, or `{ "error": … }` of the last failed one.
    pub output: Option<Value>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    #[serde(serialize_with = "timestamp")]
    pub run_at: DateTime<Utc>,
    #[serde(serialize_with = "optional_timestamp")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "optional_timestamp")]
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i32>,
    #[serde(serialize_with = "timestamp")]
    pub created_at: DateTime<Utc>,
    /// The execution this one retries (`POST /executions/{id}/retry` or replay), if any.
    pub retry_of: Option<crate::ids::ExecutionId>,
    /// Why it was made: `scheduled` (its job's time: a one-shot fire or a cron tick), `manual`
    /// (`POST /jobs/{id}/trigger`), `backfill` (`POST /jobs/{id}/backfill`) or `retry`.
    pub trigger_reason: crate::domain::TriggerReason,
    /// When it was meant to fire: the job's time, or the cron tick (retries move `run_at`,
    /// not this); for a manual fire or a backfilled tick, when it was asked for.
    #[serde(serialize_with = "timestamp")]
    pub scheduled_at: DateTime<Utc>,
    /// When a worker first took it: its first attempt's start.
    #[serde(serialize_with = "optional_timestamp")]
    pub claimed_at: Option<DateTime<Utc>>,
    /// How late its first attempt started: `claimed_at` - `scheduled_at`, in milliseconds.
    pub lateness_ms: Option<i64>,
    /// Whether it started within its job's `sla_ms` (null: no SLA, or not started yet).
    pub sla_met: Option<bool>,
    /// When an abort of its delivery in flight was asked for (`cancel?running=abort`); absent
    /// when none was.
    #[serde(serialize_with = "optional_timestamp", skip_serializing_if = "Option::is_none")]
    pub abort_requested_at: Option<DateTime<Utc>>,
    /// Its endpoint's concurrency key, made of its input: PENDING until the key has room for
    /// it (`concurrency` on the endpoint); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
}

impl From<Execution> for ExecutionOut {
    fn from(e: Execution) -> Self {
        let (lateness_ms, sla_met, trigger_reason) = (e.lateness_ms(), e.sla_met(), e.reason());
        Self {
            execution_id: e.execution_id,
            job_id: e.job_id,
            tenant: crate::domain::tenant::tenant_of(&e.endpoint).to_owned(),
            // Only its own tenant reads it: shown as that tenant names the endpoint.
            endpoint: own_name(&e.endpoint).to_owned(),
            endpoint_version: e.endpoint_version,
            endpoint_type: e.endpoint_type,
            status: e.status,
            idempotency_key: e.idempotency_key,
            input: e.input,
            output: e.output,
            attempt_count: e.attempt_count,
            max_attempts: e.max_attempts,
            run_at: e.run_at,
            started_at: e.started_at,
            completed_at: e.completed_at,
            duration_ms: e.duration_ms,
            created_at: e.created_at,
            retry_of: e.retry_of,
            trigger_reason,
            scheduled_at: e.scheduled_at.unwrap_or(e.run_at),
            claimed_at: e.claimed_at,
            lateness_ms,
            sla_met,
            abort_requested_at: e.abort_requested_at,
            concurrency_key: e.concurrency_key,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AttemptOut {
    /// Null for the attempt in flight: it is recorded when it ends.
    pub attempt_id: Option<crate::ids::AttemptId>,
    pub attempt_number: i32,
    pub status: crate::domain::AttemptStatus,
    #[serde(serialize_with = "timestamp")]
    pub started_at: DateTime<Utc>,
    #[serde(serialize_with = "optional_timestamp")]
    pub completed_at: Option<DateTime<Utc>>,
    pub duration_ms: Option<i32>,
    pub output: Option<Value>,
    /// `{ "type", "message", "retryable", … }` in docs/api.md's shape for the transport.
    pub error: Option<Value>,
}

impl From<Attempt> for AttemptOut {
    fn from(a: Attempt) -> Self {
        Self {
            attempt_id: Some(a.attempt_id),
            attempt_number: a.attempt_number,
            status: a.status,
            started_at: a.started_at,
            completed_at: a.completed_at,
            duration_ms: a.duration_ms,
            output: a.output,
            error: a.error,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct LogOut {
    pub log_id: crate::ids::LogId,
    pub attempt_number: i32,
    pub level: String,
    pub message: String,
    #[serde(serialize_with = "timestamp")]
    pub logged_at: DateTime<Utc>,
}

impl From<ExecutionLog> for LogOut {
    fn from(l: ExecutionLog) -> Self {
        Self {
            log_id: l.log_id,
            attempt_number: l.attempt_number,
            level: l.level,
            message: l.message,
            logged_at: l.logged_at,
        }
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(ErrorCode::ExecutionNotFound, format!("Execution with ID '{id}' does not exist."))
}

/// The execution, if it is the caller's tenant's: another tenant's is not found, as if it did
/// not exist.
async fn load(state: &AppState, scope: &Scope, id: &ExecutionId) -> ApiResult<Execution> {
    match state.store.execution_get(id).await? {
        Some(execution) if scope.owns(&execution.endpoint) => Ok(execution),
        _ => Err(not_found(id)),
    }
}

/// Read an execution: status, input, output, attempts made and times.
#[utoipa::path(get, path = "/executions/{execution_id}", tag = "executions", params(("execution_id" = String, Path, description = "The execution's id (`exec_…`).")), responses(
    (status = 200, description = "The execution.", body = ExecutionOut),
))]
async fn read(
    State(state): State<AppState>,
    scope: Scope,
    Path(id): Path<ExecutionId>,
) -> ApiResult<Json<ExecutionOut>> {
    Ok(Json(load(&state, &scope, &id).await?.into()))
}

/// List an execution's attempts, oldest first; the one in flight last, as RUNNING.
#[utoipa::path(get, path = "/executions/{execution_id}/attempts", tag = "executions", params(("execution_id" = String, Path, description = "The execution's id (`exec_…`)."), ListParams), responses(
    (status = 200, description = "A page of attempts.", body = ListOut<AttemptOut>),
))]
async fn attempts(
    State(state): State<AppState>,
    scope: Scope,
    Path(id): Path<ExecutionId>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<AttemptOut>>> {
    let execution = load(&state, &scope, &id).await?;
    let page = params.page_request()?;
    let rows = state.store.attempt_list(&id, &page).await?;
    let mut list = paginate(
        rows,
        &page,
        |a| PageKey { created_at: a.created_at, key: a.attempt_id.to_string() },
        AttemptOut::from,
    );
    // The attempt in flight is recorded only when it ends; until then the last page shows it
    // from its execution (a claim starts the attempt: RUNNING, started_at, attempt_count + 1).
    if list.cursor.is_none() {
        if let Some(running) = in_flight(&execution) {
            if !list.items.iter().any(|a| a.attempt_number == running.attempt_number) {
                list.items.push(running);
            }
        }
    }
    Ok(Json(list))
}

fn in_flight(execution: &Execution) -> Option<AttemptOut> {
    (execution.status == crate::domain::ExecutionStatus::Running).then_some(())?;
    Some(AttemptOut {
        attempt_id: None,
        attempt_number: execution.attempt_count,
        status: crate::domain::AttemptStatus::Running,
        started_at: execution.started_at?,
        completed_at: None,
        duration_ms: None,
        output: None,
        error: None,
    })
}

/// List the log lines of an execution's attempts, in the order they were written.
#[utoipa::path(get, path = "/executions/{execution_id}/logs", tag = "executions", params(("execution_id" = String, Path, description = "The execution's id (`exec_…`)."), ListParams), responses(
    (status = 200, description = "A page of log lines.", body = ListOut<LogOut>),
))]
async fn logs(
    State(state): State<AppState>,
    scope: Scope,
    Path(id): Path<ExecutionId>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<LogOut>>> {
    load(&state, &scope, &id).await?;
    let page = params.page_request()?;
    let rows = state.store.log_list(&id, &page).await?;
    Ok(Json(paginate(rows, &page, |l| PageKey { created_at: l.logged_at, key: l.log_id.to_string() }, LogOut::from)))
}
