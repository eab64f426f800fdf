//! `/healthz` (every loop of the process is alive), `/readyz` (it can reach its database) and
//! `/metrics` (Prometheus).
//! Unauthenticated, for load balancers and orchestrators. Served on the API's address, and on
//! `TE_HEALTH_ADDR` (for worker- and scheduler-only processes) by [`serve`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::health::Liveness;
use crate::store::Store;

/// What the health routes read.
#[derive(Clone)]
pub struct HealthState {
    pub store: Arc<dyn Store>,
    pub liveness: Arc<Liveness>,
}

pub fn router<S>() -> OpenApiRouter<S>
where
    HealthState: FromRef<S>,
    S: Clone + Send + Sync + 'static,
{
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).routes(routes!(metrics))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HealthzOut {
    /// `ok`, or `unhealthy` when a loop has stopped or gone quiet for too long.
    pub status: &'static str,
    pub loops: Vec<crate::health::LoopHealth>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReadyzOut {
    /// Always `ready`.
    pub status: &'static str,
}

/// Prometheus metrics.
///
/// Prometheus's text format: what this process recorded, and the database's current figures.
#[utoipa::path(get, path = "/metrics", tag = "health", responses(
    (status = 200, description = "The metrics, in Prometheus's text format.", body = String, content_type = "text/plain"),
))]
async fn metrics(State(state): State<HealthState>) -> Response {
    let text = crate::metrics::render(&*state.store).await;
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

/// Liveness: every loop of this process is alive.
///
/// 200 when every loop of this process is alive, else 503; both list each loop.
#[utoipa::path(get, path = "/healthz", tag = "health", responses(
    (status = 200, description = "Every loop is alive.", body = HealthzOut),
    (status = 503, description = "A loop has stopped or gone quiet.", body = HealthzOut),
))]
async fn healthz(State(state): State<HealthState>) -> Response {
    let (healthy, loops) = state.liveness.report();
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(HealthzOut { status: if healthy { "ok" } else { "unhealthy" }, loops })).into_response()
}

/// Readiness: the database answers.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, description = "Ready.", body = ReadyzOut),
    (status = 503, description = "NOT_READY: the database is unreachable.", body = super::openapi::ErrorBody),
))]
async fn readyz(State(state): State<HealthState>) -> ApiResult<Json<ReadyzOut>> {
    state.store.ping().await.map_err(|e| {
        tracing::warn!(error = %e, "Readiness check failed: the database is unreachable.");
        ApiError::new(ErrorCode::NotReady, "The database is unreachable.")
    })?;
    Ok(Json(ReadyzOut { status: "ready" }))
}

/// Serve only the health routes on `listener` until `shutdown` (processes without the API role).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HealthState,
    limits: super::server::ServerLimits,
    shutdown: CancellationToken,
) {
    let app = axum::Router::from(router::<HealthState>()).with_state(state);
    super::server::serve(listener, app, limits, async move { shutdown.cancelled().await }).await;
}

/// Bind the health address; the error names the variable.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    use anyhow::Context;
    tokio::net::TcpListener::bind(addr).await.with_context(|| format!("TE_HEALTH_ADDR: cannot listen on {addr}"))
}
