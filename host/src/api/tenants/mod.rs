//! `/tenants`: the tenants, and the API keys issued to each with a role.
//!
//! Operator keys (`TE_API_KEYS`) make tenants and see every one; a tenant's key sees its own
//! tenant alone, and another tenant is a 404 as if it did not exist. A tenant's keys are
//! managed by operator keys and by its own `admin` keys. Every deployment has the tenant
//! `default`. What a tenant's key reaches is its own tenant's (`domain::tenant`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::auth::{forbidden, generate_key, hash_key, Caller, IssuedKey};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::extract::{ApiJson, ApiQuery};
use crate::api::names::check_name;
use crate::api::pagination::{paginate, ListOut, ListParams};
use crate::api::state::AppState;
use crate::domain::quotas::Quotas;
use crate::domain::KeyRole;
use crate::ids::ApiKeyId;
use crate::store::{Inserted, PageKey, Tenant, TenantKey, TenantKeyWrite};

/// The longest label a key may carry.
pub const MAX_LABEL_CHARS: usize = 200;

mod quotas;
mod removal;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(read, quotas::update, removal::delete))
        .routes(routes!(quotas::usage))
        .routes(routes!(key_create, key_list))
        .routes(routes!(key_read, key_revoke))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct TenantOut {
    pub name: String,
    #[serde(serialize_with = "crate::api::timestamp")]
    pub created_at: DateTime<Utc>,
    /// Its own quotas (`PATCH /tenants/{tenant}`); a limit it does not set (`null`) is the
    /// server-wide default's (`GET /tenants/{tenant}/usage` shows the limits that hold).
    pub quotas: Quotas,
}

impl From<Tenant> for TenantOut {
    fn from(t: Tenant) -> Self {
        Self { name: t.name, created_at: t.created_at, quotas: t.quotas.unwrap_or_default() }
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantIn {
    /// Lowercase letters, digits and single hyphens (`acme`, `team-payments`): the name its
    /// keys' requests act within.
    pub name: String,
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyIn {
    /// `admin` (everything within the tenant, its keys included), `write` (everything but
    /// keys) or `read` (GET alone).
    pub role: KeyRole,
    /// What the key is for (up to 200 characters).
    pub label: Option<String>,
}

/// An issued key as listed: never the key itself.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyOut {
    pub key_id: ApiKeyId,
    pub tenant: String,
    pub role: KeyRole,
    pub label: Option<String>,
    #[serde(serialize_with = "crate::api::timestamp")]
    pub created_at: DateTime<Utc>,
    /// When it was revoked; null while it is accepted.
    #[serde(serialize_with = "crate::api::optional_timestamp")]
    #[schema(value_type = Option<String>)]
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<TenantKey> for KeyOut {
    fn from(k: TenantKey) -> Self {
        Self {
            key_id: k.key_id,
            tenant: k.tenant,
            role: k.role,
            label: k.label,
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// A key as made: the only answer that ever holds the key.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KeyMadeOut {
    #[serde(flatten)]
    pub issued: KeyOut,
    /// The key: send it as `Authorization: Bearer <key>`. Shown this once; only its hash is
    /// stored.
    pub key: String,
}

fn tenant_not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::TenantNotFound, format!("Tenant '{name}' does not exist."))
}

fn key_not_found(tenant: &str, key_id: &ApiKeyId) -> ApiError {
    ApiError::new(ErrorCode::ApiKeyNotFound, format!("Tenant '{tenant}' has no API key '{key_id}'."))
}

/// The tenant, if the caller may see it: an operator sees every tenant, a tenant's key its own
/// alone (another is a 404, as if it did not exist).
async fn visible_tenant(state: &AppState, caller: &Caller, name: &str) -> ApiResult<Tenant> {
    if let Caller::Tenant(key) = caller {
        if key.tenant != name {
            return Err(tenant_not_found(name));
        }
    }
    state.store.tenant_get(name).await?.ok_or_else(|| tenant_not_found(name))
}

/// The tenant, if the caller administers it: an operator, or the tenant's `admin` key (another
/// role is refused, saying that `what` needs one of those).
pub(super) async fn administered_tenant(
    state: &AppState,
    caller: &Caller,
    name: &str,
    what: &str,
) -> ApiResult<Tenant> {
    let tenant = visible_tenant(state, caller, name).await?;
    match caller {
        Caller::Tenant(key) if key.role != KeyRole::Admin => {
            Err(forbidden(caller, &format!("only an `admin` key or an operator key {what}")))
        }
        _ => Ok(tenant),
    }
}

/// The tenant, if the caller may manage its keys.
async fn keys_tenant(state: &AppState, caller: &Caller, name: &str) -> ApiResult<Tenant> {
    administered_tenant(state, caller, name, "manages API keys").await
}

/// Make a tenant (operator keys only): a team whose keys see and change its own resources
/// alone. Issue it keys with `POST /tenants/{tenant}/api-keys`.
#[utoipa::path(post, path = "/tenants", tag = "tenants", request_body = TenantIn, responses(
    (status = 201, description = "Made.", body = TenantOut),
    (status = 200, description = "The tenant already existed (an idempotent repeat).", body = TenantOut),
))]
async fn create(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<TenantIn>,
) -> ApiResult<(StatusCode, Json<TenantOut>)> {
    if caller != Caller::Operator {
        return Err(forbidden(&caller, "only operator keys (TE_API_KEYS) make tenants"));
    }
    check_name("name", &body.name)?;
    Ok(match state.store.tenant_insert(&body.name).await? {
        Inserted::Created(tenant) => (StatusCode::CREATED, Json(tenant.into())),
        Inserted::Existing(tenant) => (StatusCode::OK, Json(tenant.into())),
    })
}

/// List tenants (operator keys only).
#[utoipa::path(get, path = "/tenants", tag = "tenants", params(ListParams), responses(
    (status = 200, description = "A page of tenants, oldest first.", body = ListOut<TenantOut>),
))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<TenantOut>>> {
    if caller != Caller::Operator {
        return Err(forbidden(&caller, "only operator keys (TE_API_KEYS) list tenants"));
    }
    let page = params.page_request()?;
    let rows = state.store.tenant_list(&page).await?;
    Ok(Json(paginate(rows, &page, |r| PageKey { created_at: r.created_at, key: r.name.clone() }, Into::into)))
}

/// Read a tenant (an operator key, or any key of the tenant).
#[utoipa::path(get, path = "/tenants/{tenant}", tag = "tenants", params(("tenant" = String, Path)), responses(
    (status = 200, description = "The tenant.", body = TenantOut),
))]
async fn read(State(state): State<AppState>, caller: Caller, Path(tenant): Path<String>) -> ApiResult<Json<TenantOut>> {
    Ok(Json(visible_tenant(&state, &caller, &tenant).await?.into()))
}

/// Issue an API key to a tenant, with a role. The answer holds the key, this once.
#[utoipa::path(post, path = "/tenants/{tenant}/api-keys", tag = "tenants", params(("tenant" = String, Path)), request_body = KeyIn, responses(
    (status = 201, description = "Issued; `key` is shown this once.", body = KeyMadeOut),
))]
async fn key_create(
    State(state): State<AppState>,
    caller: Caller,
    Path(tenant): Path<String>,
    ApiJson(body): ApiJson<KeyIn>,
) -> ApiResult<(StatusCode, Json<KeyMadeOut>)> {
    let tenant = keys_tenant(&state, &caller, &tenant).await?;
    if let Some(label) = &body.label {
        if label.chars().count() > MAX_LABEL_CHARS || label.chars().any(char::is_control) {
            return Err(ApiError::invalid_field(
                "label",
                format!("must be at most {MAX_LABEL_CHARS} characters, none of them control characters"),
            ));
        }
    }
    let key = generate_key();
    let hash = hash_key(&key);
    let key_id = ApiKeyId::new();
    let row = state
        .store
        .tenant_key_insert(&TenantKeyWrite {
            key_id: &key_id,
            tenant: &tenant.name,
            role: body.role,
            label: body.label.as_deref(),
            key_hash: &hash,
        })
        .await?;
    state.keys.add_issued(hash, IssuedKey { key_id, tenant: tenant.name, role: body.role });
    Ok((StatusCode::CREATED, Json(KeyMadeOut { issued: row.into(), key })))
}

/// List a tenant's API keys, revoked ones included, oldest first.
#[utoipa::path(get, path = "/tenants/{tenant}/api-keys", tag = "tenants", params(("tenant" = String, Path), ListParams), responses(
    (status = 200, description = "A page of the tenant's keys.", body = ListOut<KeyOut>),
))]
async fn key_list(
    State(state): State<AppState>,
    caller: Caller,
    Path(tenant): Path<String>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<KeyOut>>> {
    let tenant = keys_tenant(&state, &caller, &tenant).await?;
    let page = params.page_request()?;
    let rows = state.store.tenant_key_list(&tenant.name, &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |r| PageKey { created_at: r.created_at, key: r.key_id.as_str().to_owned() },
        Into::into,
    )))
}

/// Read one of a tenant's API keys (never the key itself).
#[utoipa::path(get, path = "/tenants/{tenant}/api-keys/{key_id}", tag = "tenants", params(("tenant" = String, Path), ("key_id" = String, Path)), responses(
    (status = 200, description = "The key's record.", body = KeyOut),
))]
async fn key_read(
    State(state): State<AppState>,
    caller: Caller,
    Path((tenant, key_id)): Path<(String, ApiKeyId)>,
) -> ApiResult<Json<KeyOut>> {
    let tenant = keys_tenant(&state, &caller, &tenant).await?;
    let key =
        state.store.tenant_key_get(&tenant.name, &key_id).await?.ok_or_else(|| key_not_found(&tenant.name, &key_id))?;
    Ok(Json(key.into()))
}

/// Revoke one of a tenant's API keys: every API process refuses it within a second. Revoking
/// a revoked key again changes nothing.
#[utoipa::path(delete, path = "/tenants/{tenant}/api-keys/{key_id}", tag = "tenants", params(("tenant" = String, Path), ("key_id" = String, Path)), responses(
    (status = 204, description = "Revoked."),
))]
async fn key_revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path((tenant, key_id)): Path<(String, ApiKeyId)>,
) -> ApiResult<StatusCode> {
    let tenant = keys_tenant(&state, &caller, &tenant).await?;
    state.store.tenant_key_revoke(&tenant.name, &key_id).await?.ok_or_else(|| key_not_found(&tenant.name, &key_id))?;
    state.keys.remove_issued(&key_id);
    Ok(StatusCode::NO_CONTENT)
}
