//! `/healthz` (every loop of the process is alive), `/readyz` (it can reach its database) and
//! `/metrics` (Prometheus).
//! Unauthenticated, for load balancers and orchestrators. Served on the API's address, and on
//! `TE_HEALTH_ADDR` (for worker- and scheduler-only processes) by [`serve`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::health::Liveness;
use crate::store::Store;

/// What the health routes read.
#[derive(Clone)]
pub struct HealthState {
    pub store: Arc<dyn Store>,
    pub liveness: Arc<Liveness>,
}

pub fn router<S>() -> Router<S>
where
    HealthState: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(metrics))
}

/// Prometheus's text format: what this process recorded, and the database's current figures.
async fn metrics(State(state): State<HealthState>) -> Response {
    let text = crate::metrics::render(&*state.store).await;
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// 200 when every loop of this process is alive, else 503; both list each loop.
async fn healthz(State(state): State<HealthState>) -> Response {
    let (healthy, loops) = state.liveness.report();
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = json!({ "status": if healthy { "ok" } else { "unhealthy" }, "loops": loops });
    (status, Json(body)).into_response()
}

async fn readyz(State(state): State<HealthState>) -> ApiResult<Json<serde_json::Value>> {
    state.store.ping().await.map_err(|e| {
        tracing::warn!(error = %e, "Readiness check failed: the database is unreachable.");
        ApiError::new(ErrorCode::NotReady, "The database is unreachable.")
    })?;
    Ok(Json(json!({ "status": "ready" })))
}

/// Serve only the health routes on `listener` until `shutdown` (processes without the API role).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HealthState,
    limits: super::server::ServerLimits,
    shutdown: CancellationToken,
) {
    let app = router::<HealthState>().with_state(state);
    super::server::serve(listener, app, limits, async move { shutdown.cancelled().await }).await;
}

/// Bind the health address; the error names the variable.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    use anyhow::Context;
    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("TE_HEALTH_ADDR: cannot listen on {addr}"))
}
