//! `/configs`: named key-value objects an endpoint reads as `{{config.*}}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiJson, ApiQuery};
use super::names::check_name;
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::{check_path_name, conflict_in_use, created_or_existing, Created};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::store::{Config, Deleted, PageKey, ShownTo};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(read, update, delete))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigIn {
    pub name: String,
    pub values: Map<String, Value>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigUpdateIn {
    /// May repeat the name in the path; names cannot change.
    pub name: Option<String>,
    pub values: Map<String, Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ConfigOut {
    pub name: String,
    pub values: Value,
    #[serde(serialize_with = "super::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "super::timestamp")]
    pub updated_at: DateTime<Utc>,
}

impl From<Config> for ConfigOut {
    fn from(c: Config) -> Self {
        Self { name: c.name, values: c.values, created_at: c.created_at, updated_at: c.updated_at }
    }
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::ConfigNotFound, format!("Config '{name}' does not exist."))
}

/// Create a config: named values an endpoint reads as `{{config.*}}`.
#[utoipa::path(post, path = "/configs", tag = "configs", request_body = ConfigIn, responses(
    (status = 201, description = "Created.", body = ConfigOut),
    (status = 200, description = "The same config already existed (an idempotent repeat).", body = ConfigOut),
))]
async fn create(
    State(state): State<AppState>,
    scope: Scope,
    ApiJson(body): ApiJson<ConfigIn>,
) -> ApiResult<Created<ConfigOut>> {
    check_name("name", &body.name)?;
    let values = Value::Object(body.values);
    let inserted = state.store.config_insert(&scope.stored(&body.name), &values).await?;
    created_or_existing(
        inserted,
        &scope,
        |existing| existing.values == values,
        || format!("Config '{0}' already exists with different values; change it with PUT /configs/{0}.", body.name),
    )
}

/// List configs, oldest first.
#[utoipa::path(get, path = "/configs", tag = "configs", params(ListParams), responses(
    (status = 200, description = "A page of configs.", body = ListOut<ConfigOut>),
))]
async fn list(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<ConfigOut>>> {
    let page = params.page_request()?;
    let rows = state.store.config_list(scope.tenant(), &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |r| PageKey { created_at: r.created_at, key: r.name.clone() },
        |r| r.shown_to(&scope).into(),
    )))
}

/// Read a config.
#[utoipa::path(get, path = "/configs/{name}", tag = "configs", params(("name" = String, Path)), responses(
    (status = 200, description = "The config.", body = ConfigOut),
))]
async fn read(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<Json<ConfigOut>> {
    let config = state.store.config_get(&scope.stored(&name)).await?.ok_or_else(|| not_found(&name))?;
    Ok(Json(config.shown_to(&scope).into()))
}

/// Replace a config's values.
///
/// Takes effect for executions that start after it; one already running keeps the values it
/// started with.
#[utoipa::path(put, path = "/configs/{name}", tag = "configs", params(("name" = String, Path)), request_body = ConfigUpdateIn, responses(
    (status = 200, description = "The config as it now is.", body = ConfigOut),
))]
async fn update(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<ConfigUpdateIn>,
) -> ApiResult<Json<ConfigOut>> {
    check_path_name(&name, body.name.as_deref())?;
    let updated = state.store.config_update(&scope.stored(&name), &Value::Object(body.values)).await?;
    Ok(Json(updated.ok_or_else(|| not_found(&name))?.shown_to(&scope).into()))
}

/// Delete a config no endpoint uses.
#[utoipa::path(delete, path = "/configs/{name}", tag = "configs", params(("name" = String, Path)), responses(
    (status = 204, description = "Deleted."),
))]
async fn delete(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<StatusCode> {
    match state.store.config_delete(&scope.stored(&name)).await? {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT),
        Deleted::NotFound => Err(not_found(&name)),
        Deleted::InUse(endpoints) => Err(conflict_in_use(&format!("Config '{name}'"), "endpoints", &scope, &endpoints)),
    }
}
