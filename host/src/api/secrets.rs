//! `/secrets`: sensitive values, encrypted at rest, referenced as `{{secret.NAME}}`. A value is
//! accepted on create and update and never returned, logged, or echoed in an error.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use subtle::ConstantTimeEq;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiJson, ApiQuery};
use super::names::check_secret_name;
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::{check_path_name, conflict_in_use, created_or_existing, Created};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::secret::hosts::AllowedHosts;
use crate::secret::SecretValue;
use crate::store::{Deleted, PageKey, Secret, ShownTo};

/// Large enough for a PEM private key or a service-account JSON.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(read, update, delete))
}

/// `value` is taken as raw JSON and checked by hand: serde's own type errors quote the
/// offending value ("invalid type: integer `123`"), which for a secret would echo it.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretIn {
    pub name: String,
    pub value: Value,
    /// The hosts the secret may be sent to: names (`api.example.com`), `*.` wildcards over a
    /// domain's subdomains (`*.example.com`) and IP addresses; at most 32. A delivery that
    /// reads the secret and goes anywhere else fails permanently (`SECRET_HOST_NOT_ALLOWED`)
    /// before anything is sent. Left out or null: any host.
    #[schema(max_items = 32)]
    pub allowed_hosts: Option<Vec<String>>,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretUpdateIn {
    pub name: Option<String>,
    pub value: Value,
    /// As on create. Left out: the list stays as it is (a rotation keeps it); null: any host.
    #[serde(default, deserialize_with = "present")]
    #[schema(max_items = 32, nullable)]
    pub allowed_hosts: Option<Option<Vec<String>>>,
}

/// A field that is present, even as `null`, is `Some`: PUT tells "leave it" from "clear it".
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Metadata only: there is deliberately no field for the value.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SecretOut {
    pub name: String,
    /// Where the secret may be sent; null: any host.
    pub allowed_hosts: Option<Vec<String>>,
    #[serde(serialize_with = "super::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "super::timestamp")]
    pub updated_at: DateTime<Utc>,
}

impl From<Secret> for SecretOut {
    fn from(s: Secret) -> Self {
        let allowed_hosts = s.allowed_hosts.as_deref().and_then(AllowedHosts::from_json).map(|h| h.entries().to_vec());
        Self { name: s.name, allowed_hosts, created_at: s.created_at, updated_at: s.updated_at }
    }
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::SecretNotFound, format!("Secret '{name}' does not exist."))
}

fn allowed_hosts(entries: Option<&[String]>) -> ApiResult<Option<AllowedHosts>> {
    entries.map(AllowedHosts::parse).transpose().map_err(|(field, why)| ApiError::invalid_field(&field, why))
}

fn secret_value(value: Value) -> ApiResult<SecretValue> {
    match value {
        Value::String(s) if s.is_empty() => Err(ApiError::invalid_field("value", "must not be empty")),
        Value::String(s) if s.len() > MAX_SECRET_BYTES => {
            Err(ApiError::invalid_field("value", format!("must be at most {MAX_SECRET_BYTES} bytes")))
        }
        Value::String(s) => Ok(SecretValue::new(s)),
        _ => Err(ApiError::invalid_field("value", "must be a string")),
    }
}

/// Create a secret: a value stored encrypted, read by endpoints as `{{secret.*}}` and never shown again.
#[utoipa::path(post, path = "/secrets", tag = "secrets", request_body = SecretIn, responses(
    (status = 201, description = "Created.", body = SecretOut),
    (status = 200, description = "The same secret already existed (an idempotent repeat).", body = SecretOut),
))]
async fn create(
    State(state): State<AppState>,
    scope: Scope,
    ApiJson(body): ApiJson<SecretIn>,
) -> ApiResult<Created<SecretOut>> {
    check_secret_name("name", &body.name)?;
    let value = secret_value(body.value)?;
    let hosts = allowed_hosts(body.allowed_hosts.as_deref())?.map(|h| h.to_json());
    // Sealed under its stored name, which names its tenant: an envelope copied onto another
    // tenant's secret does not open (`secret::Cipher`).
    let stored = scope.stored(&body.name);
    let sealed = state.cipher.seal(&stored, &value);
    let inserted = state.store.secret_insert(&stored, &sealed, hosts.as_deref()).await?;
    // A repeat of the same create is answered 200 like any idempotent create; a different value
    // under the same name is a conflict (rotation is an explicit PUT).
    created_or_existing(
        inserted,
        &scope,
        |existing| {
            existing.allowed_hosts == hosts
                && state
                    .cipher
                    .open(&stored, &existing.encrypted_value)
                    .is_ok_and(|old| bool::from(old.expose().as_bytes().ct_eq(value.expose().as_bytes())))
        },
        || format!("Secret '{0}' already exists; rotate its value with PUT /secrets/{0}.", body.name),
    )
}

/// List secrets (names and times; never values), oldest first.
#[utoipa::path(get, path = "/secrets", tag = "secrets", params(ListParams), responses(
    (status = 200, description = "A page, oldest first.", body = ListOut<SecretOut>),
))]
async fn list(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<SecretOut>>> {
    let page = params.page_request()?;
    let rows = state.store.secret_list(scope.tenant(), &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |r| PageKey { created_at: r.created_at, key: r.name.clone() },
        |r| r.shown_to(&scope).into(),
    )))
}

/// Read a secret's name and times (never its value).
#[utoipa::path(get, path = "/secrets/{name}", tag = "secrets", params(("name" = String, Path)), responses(
    (status = 200, description = "The secret.", body = SecretOut),
))]
async fn read(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<Json<SecretOut>> {
    let secret = state.store.secret_get(&scope.stored(&name)).await?.ok_or_else(|| not_found(&name))?;
    Ok(Json(secret.shown_to(&scope).into()))
}

/// Replace a secret's value (and, when given, where it may be sent).
///
/// Rotate a value. Executions that start afterwards use the new value (once the workers'
/// secret cache, `TE_SECRET_CACHE_TTL_SEC`, has expired).
#[utoipa::path(put, path = "/secrets/{name}", tag = "secrets", params(("name" = String, Path)), request_body = SecretUpdateIn, responses(
    (status = 200, description = "The secret as it now is.", body = SecretOut),
))]
async fn update(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<SecretUpdateIn>,
) -> ApiResult<Json<SecretOut>> {
    check_path_name(&name, body.name.as_deref())?;
    let value = secret_value(body.value)?;
    let hosts = match &body.allowed_hosts {
        None => None,
        Some(entries) => Some(allowed_hosts(entries.as_deref())?.map(|h| h.to_json())),
    };
    let stored = scope.stored(&name);
    let sealed = state.cipher.seal(&stored, &value);
    let secret = state
        .store
        .secret_update(&stored, &sealed, hosts.as_ref().map(Option::as_deref))
        .await?
        .ok_or_else(|| not_found(&name))?;
    Ok(Json(secret.shown_to(&scope).into()))
}

/// Delete a secret no endpoint uses.
#[utoipa::path(delete, path = "/secrets/{name}", tag = "secrets", params(("name" = String, Path)), responses(
    (status = 204, description = "Deleted."),
))]
async fn delete(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<StatusCode> {
    match state.store.secret_delete(&scope.stored(&name)).await? {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT),
        Deleted::NotFound => Err(not_found(&name)),
        Deleted::InUse(endpoints) => Err(conflict_in_use(&format!("Secret '{name}'"), "endpoints", &scope, &endpoints)),
    }
}
