//! A tenant's quotas: set by operator keys (`PATCH /tenants/{tenant}`), and what it uses of
//! each (`GET /tenants/{tenant}/usage`). How they are held and checked is `crate::quota`.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{tenant_not_found, visible_tenant, TenantOut};
use crate::api::auth::{forbidden, Caller};
use crate::api::error::{ApiError, ApiResult};
use crate::api::extract::ApiJson;
use crate::api::state::AppState;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantPatchIn {
    /// A JSON merge patch of the tenant's own quotas: a limit given sets it, `null` unsets it
    /// (the server-wide default holds again), a limit not given stays as it is.
    #[schema(value_type = Object)]
    pub quotas: Value,
}

/// One quota as it holds for a tenant: its limit (null: none) and what the tenant uses of it
/// now (null where there is nothing to count: a rate, a bound on one request).
#[derive(Serialize, utoipa::ToSchema)]
pub struct UsageOf {
    pub limit: Option<u64>,
    pub used: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct UsageOut {
    pub tenant: String,
    pub creates_per_second: UsageOf,
    pub active_cron_jobs: UsageOf,
    pub min_cron_interval_sec: UsageOf,
    pub unfinished_executions: UsageOf,
    pub endpoints: UsageOf,
    pub max_input_bytes: UsageOf,
}

/// Change a tenant's quotas (operator keys only).
///
/// Takes effect at once on this process and within a second on every other.
#[utoipa::path(patch, path = "/tenants/{tenant}", tag = "tenants", params(("tenant" = String, Path)), request_body = TenantPatchIn, responses(
    (status = 200, description = "The tenant with its quotas as they now are.", body = TenantOut),
))]
pub(super) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(tenant): Path<String>,
    ApiJson(body): ApiJson<TenantPatchIn>,
) -> ApiResult<Json<TenantOut>> {
    if caller != Caller::Operator {
        return Err(forbidden(&caller, "only operator keys (TE_API_KEYS) set a tenant's quotas"));
    }
    let now = state.store.tenant_get(&tenant).await?.ok_or_else(|| tenant_not_found(&tenant))?;
    let quotas = now
        .quotas
        .unwrap_or_default()
        .patched(&body.quotas)
        .map_err(|(field, why)| ApiError::invalid_field(&field, why))?;
    let updated = state.store.tenant_quotas_set(&tenant, &quotas).await?.ok_or_else(|| tenant_not_found(&tenant))?;
    state.quotas.set(&tenant, quotas);
    Ok(Json(updated.into()))
}

/// What a tenant uses of each of its quotas, and the limits that hold for it (an operator
/// key, or any key of the tenant).
#[utoipa::path(get, path = "/tenants/{tenant}/usage", tag = "tenants", params(("tenant" = String, Path)), responses(
    (status = 200, description = "Each quota's limit (null: none) and what the tenant uses of it now.", body = UsageOut),
))]
pub(super) async fn usage(
    State(state): State<AppState>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> ApiResult<Json<UsageOut>> {
    let tenant = visible_tenant(&state, &caller, &tenant).await?.name;
    let limits = state.quotas.of(&tenant);
    let count = |n: i64| Some(u64::try_from(n).unwrap_or(0));
    let unfinished: i64 = state.store.execution_counts(Some(&tenant)).await?.iter().map(|(_, n)| n).sum();
    Ok(Json(UsageOut {
        creates_per_second: UsageOf { limit: limits.creates_per_second.map(u64::from), used: None },
        active_cron_jobs: UsageOf {
            limit: limits.active_cron_jobs.map(u64::from),
            used: count(state.store.cron_active_count(&tenant).await?),
        },
        min_cron_interval_sec: UsageOf { limit: limits.min_cron_interval_sec.map(u64::from), used: None },
        unfinished_executions: UsageOf { limit: limits.unfinished_executions, used: count(unfinished) },
        endpoints: UsageOf {
            limit: limits.endpoints.map(u64::from),
            used: count(state.store.endpoint_count(&tenant).await?),
        },
        max_input_bytes: UsageOf { limit: limits.max_input_bytes.map(u64::from), used: None },
        tenant,
    }))
}
