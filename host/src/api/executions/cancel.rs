//! `POST /executions/{id}/cancel`: an execution that has not started is cancelled at once; one
//! in flight only when asked to abort it (`?running=abort`), which the worker holding it does
//! (`worker::abort`): the delivery dropped where it is, the attempt and the execution
//! CANCELLED, no retry.

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

use super::{load, ExecutionOut};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::extract::ApiQuery;
use crate::api::state::AppState;
use crate::domain::{ExecutionStatus, Scope};
use crate::ids::ExecutionId;
use crate::store::Signal;

/// How long the request waits for the worker to stop an aborted delivery before answering
/// `202` with the execution still RUNNING (its abort asked for). A worker learns of it at once
/// where the database notifies (PostgreSQL), else within a second (`worker::abort::EVERY`).
const ABORT_WAIT: Duration = Duration::from_secs(5);
/// How often the execution is read meanwhile: at most 50 reads a request, however many
/// requests wait on a worker that is gone (a read of one row by its key each).
const ABORT_POLL: Duration = Duration::from_millis(100);

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CancelParams {
    /// `abort`: also cancel a RUNNING execution, by stopping its delivery in flight (the
    /// connection dropped; the attempt and the execution `CANCELLED`, never retried). Without
    /// it a RUNNING execution is `409 EXECUTION_NOT_CANCELLABLE`.
    pub running: Option<Running>,
}

/// What to do with an execution in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Running {
    /// Stop its delivery where it is.
    Abort,
}

/// Cancel an execution.
///
/// Cancel an execution that has not started (PENDING, QUEUED, RETRYING). Racing a worker's
/// claim, exactly one wins: the claim (409 here) or the cancel (the worker never sees it). With
/// `?running=abort` a RUNNING execution is cancelled too: its worker drops the delivery in
/// flight and records the attempt and the execution `CANCELLED` (`ABORTED`); the answer is
/// `200` once it has, or `202` with the execution still RUNNING if its worker has not within
/// 5 s (it will, or the reclaimer cancels it when the worker's lease runs out). A delivery that
/// finished before the abort reached it is a `409` naming its status.
#[utoipa::path(post, path = "/executions/{execution_id}/cancel", tag = "executions",
    params(("execution_id" = String, Path, description = "The execution's id (`exec_…`)."), CancelParams),
    responses(
        (status = 200, description = "The execution, CANCELLED.", body = ExecutionOut),
        (status = 202, description = "The abort is asked for; the execution is still RUNNING (`abort_requested_at`).", body = ExecutionOut),
    ))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    scope: Scope,
    Path(id): Path<ExecutionId>,
    ApiQuery(params): ApiQuery<CancelParams>,
) -> ApiResult<(StatusCode, Json<ExecutionOut>)> {
    // Whose it is, before anything is changed.
    load(&state, &scope, &id).await?;
    if state.store.execution_cancel(&id).await? {
        return Ok((StatusCode::OK, Json(load(&state, &scope, &id).await?.into())));
    }
    let execution = load(&state, &scope, &id).await?;
    match execution.status {
        ExecutionStatus::Cancelled => Ok((StatusCode::OK, Json(execution.into()))),
        ExecutionStatus::Running if params.running == Some(Running::Abort) => abort(&state, &scope, &id).await,
        ExecutionStatus::Running => Err(ApiError::new(
            ErrorCode::ExecutionNotCancellable,
            format!("Execution '{id}' is RUNNING: `?running=abort` stops its delivery in flight."),
        )),
        status => Err(not_cancellable(&id, status)),
    }
}

fn not_cancellable(id: &ExecutionId, status: ExecutionStatus) -> ApiError {
    ApiError::new(
        ErrorCode::ExecutionNotCancellable,
        format!("Execution '{id}' is {status} and can no longer be cancelled."),
    )
}

/// Ask the worker holding `id` to abort it, and wait (up to [`ABORT_WAIT`]) for the outcome.
async fn abort(state: &AppState, scope: &Scope, id: &ExecutionId) -> ApiResult<(StatusCode, Json<ExecutionOut>)> {
    if state.store.execution_abort_request(id).await? {
        if let Err(error) = state.store.signal(Signal::AbortRequested).await {
            tracing::warn!(%error, "Could not notify the workers of an abort; they find it within a second.");
        }
    }
    let deadline = Instant::now() + ABORT_WAIT;
    loop {
        let execution = load(state, scope, id).await?;
        match execution.status {
            ExecutionStatus::Cancelled => return Ok((StatusCode::OK, Json(execution.into()))),
            ExecutionStatus::Running if Instant::now() >= deadline => {
                return Ok((StatusCode::ACCEPTED, Json(execution.into())))
            }
            ExecutionStatus::Running => tokio::time::sleep(ABORT_POLL).await,
            // The attempt ended before the abort reached it, and another is to come: that one
            // is cancelled before it starts.
            ExecutionStatus::Pending | ExecutionStatus::Queued | ExecutionStatus::Retrying => {
                if state.store.execution_cancel(id).await? {
                    return Ok((StatusCode::OK, Json(load(state, scope, id).await?.into())));
                }
            }
            status => return Err(not_cancellable(id, status)),
        }
    }
}
