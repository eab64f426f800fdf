//! The REST API: one module per resource, each exporting `router()`; this module merges them
//! and wraps them in the layers every request passes through (request id, panic guard, body
//! limit, and for everything but the health checks API-key authentication and the audit
//! trail).

pub mod audit;
pub mod auth;
pub mod configs;
pub mod endpoints;
pub mod error;
pub mod executions;
pub mod extract;
pub mod health;
pub mod jobs;
pub mod names;
pub mod openapi;
pub mod pagination;
pub mod payload_specs;
pub mod plugins;
pub mod request_id;
pub mod schema_limits;
pub mod secrets;
pub mod server;
pub mod state;
pub mod tenants;
pub mod throttle;
pub mod validators;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{middleware, Json, Router};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::store::{Inserted, ShownTo};
pub use auth::ApiKeys;
pub use state::{AppContext, AppState};

pub fn router(
    state: AppState,
    api_keys: Arc<ApiKeys>,
    audit: audit::AuditLog,
    max_body_bytes: usize,
    max_plugin_bytes: usize,
) -> Router {
    let (routes, doc) = documented(api_keys, audit, max_plugin_bytes).split_for_parts();
    let docs = utoipa_swagger_ui::SwaggerUi::new("/docs").url("/openapi.json", openapi::complete(doc));
    Router::new()
        .merge(routes)
        .merge(docs)
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "No such route.") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(ErrorCode::MethodNotAllowed, "This route does not take that method.")
        })
        .layer(middleware::from_fn(extract::reject_nul))
        .layer(middleware::from_fn(openapi::docs_headers))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::internal(&std::io::Error::other("handler panicked")).into_response()
        }))
        .layer(middleware::from_fn(request_id::middleware))
        .with_state(state)
}

/// Every route of the API, each registered with its OpenAPI operation. `/openapi.json` and
/// `/docs` (Swagger UI, its assets in the binary) describe these and are not among them.
pub fn documented(api_keys: Arc<ApiKeys>, audit: audit::AuditLog, max_plugin_bytes: usize) -> OpenApiRouter<AppState> {
    let mut authenticated = OpenApiRouter::new()
        .merge(payload_specs::router())
        .merge(configs::router())
        .merge(secrets::router())
        .merge(endpoints::router())
        .merge(jobs::router())
        .merge(executions::router())
        .merge(plugins::router(max_plugin_bytes))
        .merge(tenants::router())
        .merge(audit::router());
    openapi::require_api_key(authenticated.get_openapi_mut());
    // Authentication runs first (the outer layer) and tells the audit layer who is asking; the
    // role's check runs inside the audit layer, so that what it refuses is recorded.
    let authenticated = authenticated
        .route_layer(middleware::from_fn(auth::require_role))
        .route_layer(middleware::from_fn_with_state(audit, audit::record))
        .route_layer(middleware::from_fn_with_state(api_keys, auth::require_api_key));
    OpenApiRouter::with_openapi(<openapi::ApiDoc as utoipa::OpenApi>::openapi())
        .merge(health::router())
        .merge(authenticated)
}

/// Every timestamp the API returns: UTC, RFC 3339, always six fraction digits, so that
/// clients (and string comparisons) see one fixed format.
pub fn timestamp<S: serde::Serializer>(t: &chrono::DateTime<chrono::Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
}

/// An optional time as `timestamp` writes one, or null.
pub fn optional_timestamp<S: serde::Serializer>(
    t: &Option<chrono::DateTime<chrono::Utc>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => timestamp(t, serializer),
        None => serializer.serialize_none(),
    }
}

/// 201 with the new resource, or 200 with the existing one on an idempotent repeat.
pub struct Created<T>(pub StatusCode, pub T);

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        (self.0, Json(self.1)).into_response()
    }
}

/// Answer a create: 201 for a new row; 200 for a repeat whose content is `same` (compared as
/// stored); otherwise a 409 with `conflict()` as the message. The row is shown to `scope`.
pub fn created_or_existing<R: ShownTo, T: From<R>>(
    inserted: Inserted<R>,
    scope: &Scope,
    same: impl FnOnce(&R) -> bool,
    conflict: impl FnOnce() -> String,
) -> ApiResult<Created<T>> {
    match inserted {
        Inserted::Created(row) => Ok(Created(StatusCode::CREATED, row.shown_to(scope).into())),
        Inserted::Existing(row) if same(&row) => Ok(Created(StatusCode::OK, row.shown_to(scope).into())),
        Inserted::Existing(_) => Err(ApiError::conflict(conflict())),
    }
}

/// An update body may repeat the name; if it does, it must be the one in the path.
pub fn check_path_name(path_name: &str, body_name: Option<&str>) -> ApiResult<()> {
    match body_name {
        Some(body_name) if body_name != path_name => Err(ApiError::invalid_field(
            "name",
            format!("'{body_name}' does not match the name in the path ('{path_name}'); names cannot be changed"),
        )),
        _ => Ok(()),
    }
}

/// 409 CONFLICT for a delete that dependents block, naming them (by their stored names, shown
/// to the caller's tenant: `domain::tenant`).
pub fn conflict_in_use(what: &str, kind: &str, scope: &Scope, users: &[String]) -> ApiError {
    if users.is_empty() {
        ApiError::conflict(format!("{what} is still in use by {kind}; remove them first."))
    } else {
        let users: Vec<String> = users.iter().map(|u| scope.shown(u)).collect();
        ApiError::conflict(format!("{what} is in use by {kind}: {}. Remove or change them first.", users.join(", ")))
    }
}
