//! `/payload-specs`: JSON Schemas that job inputs are validated against.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiJson, ApiQuery};
use super::names::check_name;
use super::pagination::{paginate, ListOut, ListParams};
use super::schema_limits::{self, SchemaLimits};
use super::state::AppState;
use super::{check_path_name, conflict_in_use, created_or_existing, Created};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::store::{Deleted, PageKey, PayloadSpec, ShownTo};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(read, update, delete))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayloadSpecIn {
    pub name: String,
    pub schema: Value,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayloadSpecUpdateIn {
    /// Optional on update; when sent it must match the path.
    pub name: Option<String>,
    pub schema: Value,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct PayloadSpecOut {
    pub name: String,
    pub schema: Value,
    #[serde(serialize_with = "super::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "super::timestamp")]
    pub updated_at: DateTime<Utc>,
}

impl From<PayloadSpec> for PayloadSpecOut {
    fn from(s: PayloadSpec) -> Self {
        Self { name: s.name, schema: s.schema, created_at: s.created_at, updated_at: s.updated_at }
    }
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::PayloadSpecNotFound, format!("Payload spec '{name}' does not exist."))
}

/// The schema must itself be valid JSON Schema (checked against its draft's meta-schema), and
/// must compile: a `$ref` that does not resolve is refused now. Remote `$ref`s are never
/// fetched, so a schema cannot make the server call out.
fn check_schema(schema: &Value, limits: SchemaLimits) -> ApiResult<()> {
    let invalid = |detail: String| {
        ApiError::new(ErrorCode::InvalidSchema, format!("`schema` is not a valid JSON Schema: {detail}"))
    };
    if !schema.is_object() && !schema.is_boolean() {
        return Err(invalid("a schema is a JSON object (or true/false)".into()));
    }
    match jsonschema::meta::try_validate(schema) {
        Err(e) => return Err(invalid(e.to_string())),
        Ok(Err(e)) => {
            let at = e.instance_path.to_string();
            return Err(invalid(if at.is_empty() { e.to_string() } else { format!("at `{at}`: {e}") }));
        }
        Ok(Ok(())) => {}
    }
    super::validators::options().build(schema).map_err(|e| invalid(e.to_string()))?;
    schema_limits::check(schema, limits).map_err(|e| invalid(e.to_string()))
}

/// Create a payload spec: a JSON Schema that jobs' `input` is validated against.
#[utoipa::path(post, path = "/payload-specs", tag = "payload-specs", request_body = PayloadSpecIn, responses(
    (status = 201, description = "Created.", body = PayloadSpecOut),
    (status = 200, description = "The same payload spec already existed (an idempotent repeat).", body = PayloadSpecOut),
))]
async fn create(
    State(state): State<AppState>,
    scope: Scope,
    ApiJson(body): ApiJson<PayloadSpecIn>,
) -> ApiResult<Created<PayloadSpecOut>> {
    check_name("name", &body.name)?;
    check_schema(&body.schema, state.validators.limits)?;
    let inserted = state.store.payload_spec_insert(&scope.stored(&body.name), &body.schema).await?;
    created_or_existing(
        inserted,
        &scope,
        |existing| existing.schema == body.schema,
        || {
            format!(
                "Payload spec '{0}' already exists with a different schema; change it with PUT /payload-specs/{0}.",
                body.name
            )
        },
    )
}

/// List payload specs, oldest first.
#[utoipa::path(get, path = "/payload-specs", tag = "payload-specs", params(ListParams), responses(
    (status = 200, description = "A page, oldest first.", body = ListOut<PayloadSpecOut>),
))]
async fn list(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<PayloadSpecOut>>> {
    let page = params.page_request()?;
    let rows = state.store.payload_spec_list(scope.tenant(), &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |r| PageKey { created_at: r.created_at, key: r.name.clone() },
        |r| r.shown_to(&scope).into(),
    )))
}

/// Read a payload spec.
#[utoipa::path(get, path = "/payload-specs/{name}", tag = "payload-specs", params(("name" = String, Path)), responses(
    (status = 200, description = "The payload spec.", body = PayloadSpecOut),
))]
async fn read(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
) -> ApiResult<Json<PayloadSpecOut>> {
    let spec = state.store.payload_spec_get(&scope.stored(&name)).await?.ok_or_else(|| not_found(&name))?;
    Ok(Json(spec.shown_to(&scope).into()))
}

/// Replace a payload spec's schema.
#[utoipa::path(put, path = "/payload-specs/{name}", tag = "payload-specs", params(("name" = String, Path)), request_body = PayloadSpecUpdateIn, responses(
    (status = 200, description = "The payload spec as it now is.", body = PayloadSpecOut),
))]
async fn update(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<PayloadSpecUpdateIn>,
) -> ApiResult<Json<PayloadSpecOut>> {
    check_path_name(&name, body.name.as_deref())?;
    check_schema(&body.schema, state.validators.limits)?;
    let updated = state.store.payload_spec_update(&scope.stored(&name), &body.schema).await?;
    Ok(Json(updated.ok_or_else(|| not_found(&name))?.shown_to(&scope).into()))
}

/// Delete a payload spec no endpoint uses.
#[utoipa::path(delete, path = "/payload-specs/{name}", tag = "payload-specs", params(("name" = String, Path)), responses(
    (status = 204, description = "Deleted."),
))]
async fn delete(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<StatusCode> {
    match state.store.payload_spec_delete(&scope.stored(&name)).await? {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT),
        Deleted::NotFound => Err(not_found(&name)),
        Deleted::InUse(endpoints) => {
            Err(conflict_in_use(&format!("Payload spec '{name}'"), "endpoints", &scope, &endpoints))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_checks() {
        assert!(check_schema(
            &json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            SchemaLimits::default()
        )
        .is_ok());
        assert!(check_schema(&json!(true), SchemaLimits::default()).is_ok());
        for bad in [
            json!({"type": "invalid_type"}),
            json!({"properties": {"a": {"minLength": -1}}}),
            json!("string"),
            json!({"$ref": "#/definitions/missing"}),
            json!({"$ref": "http://127.0.0.1:1/schema.json"}),
            // Look-around needs a backtracking engine: patterns run on a linear-time one.
            json!({"properties": {"a": {"pattern": "^(?=a)a+$"}}}),
            json!({"patternProperties": {"(a)\\1": {}}}),
            json!({"items": {"$ref": "#"}}),
        ] {
            let err = check_schema(&bad, SchemaLimits::default()).unwrap_err();
            assert_eq!((err.code.status().as_u16(), err.code), (422, ErrorCode::InvalidSchema), "{bad}");
        }
    }
}
