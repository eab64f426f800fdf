//! `/healthz` (the process is up) and `/readyz` (it can reach its database). Unauthenticated,
//! for load balancers and orchestrators.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::state::AppState;
use crate::error::{ApiError, ApiResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state.store.ping().await.map_err(|e| {
        tracing::warn!(error = %e, "Readiness check failed: the database is unreachable.");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "NOT_READY", "The database is unreachable.")
    })?;
    Ok(Json(json!({ "status": "ready" })))
}
