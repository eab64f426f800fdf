//! `DELETE /tenants/{tenant}`: a tenant and everything it holds, once nothing of it is active.

use axum::extract::{Path, State};
use axum::http::StatusCode;

use super::tenant_not_found;
use crate::api::auth::{forbidden, Caller};
use crate::api::error::{ApiError, ApiResult};
use crate::api::state::AppState;
use crate::domain::DEFAULT_TENANT;
use crate::store::{Deleted, PageRequest, Store};

/// Delete a tenant (operator keys only), with its keys, endpoints, configs, payload specs,
/// secrets and finished history.
///
/// Refused (`409`) while it has an active CRON job or an unfinished execution: cancel them
/// first. Its keys are refused at once here and within a second on every other API process;
/// its audit records stay until the retention purge. `default` cannot be deleted.
#[utoipa::path(delete, path = "/tenants/{tenant}", tag = "tenants", params(("tenant" = String, Path)), responses(
    (status = 204, description = "Deleted, with everything it held."),
))]
pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(tenant): Path<String>,
) -> ApiResult<StatusCode> {
    if caller != Caller::Operator {
        return Err(forbidden(&caller, "only operator keys (TE_API_KEYS) delete tenants"));
    }
    if tenant == DEFAULT_TENANT {
        return Err(ApiError::conflict("The tenant `default` is every deployment's: it cannot be deleted."));
    }
    state.store.tenant_get(&tenant).await?.ok_or_else(|| tenant_not_found(&tenant))?;
    let store = &*state.store;
    let cron = store.cron_active_count(&tenant).await?;
    let unfinished: i64 = store.execution_counts(Some(&tenant)).await?.iter().map(|(_, n)| n).sum();
    if cron > 0 || unfinished > 0 {
        return Err(ApiError::conflict(format!(
            "Tenant '{tenant}' has {cron} active CRON job(s) and {unfinished} unfinished execution(s): cancel them (or let them finish), then delete it."
        )));
    }
    // Its keys first, so that nothing new is made while the rest goes.
    for key_id in store.tenant_keys_delete(&tenant).await? {
        state.keys.remove_issued(&key_id);
    }
    remove_resources(store, &tenant).await?;
    store.tenant_delete(&tenant).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete every endpoint (with its finished jobs and their history), config, payload spec and
/// secret of `tenant`, endpoints first: they refer to the rest. An endpoint a job made active
/// meanwhile refuses, and so does the request (`409`, naming it): the tenant stays, without its
/// keys, until it is asked again.
async fn remove_resources(store: &dyn Store, tenant: &str) -> ApiResult<()> {
    let first = PageRequest { after: None, limit: 200, newest_first: false };
    loop {
        let endpoints = store.endpoint_list(tenant, &first).await?;
        if endpoints.is_empty() {
            break;
        }
        for endpoint in endpoints {
            if let Deleted::InUse(jobs) = store.endpoint_delete(&endpoint.name).await? {
                return Err(ApiError::conflict(format!(
                    "Endpoint '{}' of tenant '{tenant}' is in use by jobs: {}. Cancel them, then delete the tenant again.",
                    crate::domain::tenant::own_name(&endpoint.name),
                    jobs.join(", ")
                )));
            }
        }
    }
    // Nothing of the tenant's refers to these any more; one that is still in use (an endpoint
    // made meanwhile) refuses the request rather than loop.
    let in_use = |what: &str, name: &str| {
        ApiError::conflict(format!(
            "{what} '{}' of tenant '{tenant}' is still in use; delete the tenant again.",
            crate::domain::tenant::own_name(name)
        ))
    };
    loop {
        let configs = store.config_list(tenant, &first).await?;
        if configs.is_empty() {
            break;
        }
        for config in configs {
            if let Deleted::InUse(_) = store.config_delete(&config.name).await? {
                return Err(in_use("Config", &config.name));
            }
        }
    }
    loop {
        let specs = store.payload_spec_list(tenant, &first).await?;
        if specs.is_empty() {
            break;
        }
        for spec in specs {
            if let Deleted::InUse(_) = store.payload_spec_delete(&spec.name).await? {
                return Err(in_use("Payload spec", &spec.name));
            }
        }
    }
    loop {
        let secrets = store.secret_list(tenant, &first).await?;
        if secrets.is_empty() {
            break;
        }
        for secret in secrets {
            if let Deleted::InUse(_) = store.secret_delete(&secret.name).await? {
                return Err(in_use("Secret", &secret.name));
            }
        }
    }
    Ok(())
}
