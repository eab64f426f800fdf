//! `/plugins`: WebAssembly components installed at runtime.
//!
//! `POST /plugins?name=NAME[&world=W][&allow_host=URL…][&memory_mb=N][&calls_per_instance=N]`
//! with the component's bytes as the body installs a new version under NAME. The upload is
//! compiled and type-checked against the world it implements (and the one it claims): a core
//! module, garbage, a missing export, or an import the host does not offer is a 422
//! INVALID_PLUGIN saying what to fix; a body over `TE_PLUGIN_MAX_BYTES` is a 413. Re-uploading
//! the bytes of the current version is an idempotent repeat (200).

use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiBytes, ApiQuery};
use super::names::check_name;
use super::pagination::{paginate, ListOut, ListParams};
use super::state::AppState;
use super::{conflict_in_use, Created};
use crate::api::auth::Caller;
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::plugin::limits::InstallLimits;
use crate::plugin::{Grants, PluginLimits, World};
use crate::store::{Deleted, PageKey, PluginRecord, PluginWrite};

pub fn router(max_plugin_bytes: usize) -> OpenApiRouter<AppState> {
    // Uploads have their own body limit (TE_MAX_PLUGIN_BYTES), on the install route only.
    let (schemas, paths, install) = routes!(install);
    OpenApiRouter::new()
        .routes((schemas, paths, install.layer(DefaultBodyLimit::max(max_plugin_bytes))))
        .routes(routes!(list))
        .routes(routes!(read, remove))
        .routes(routes!(remove_version))
        .routes(routes!(rollback))
}

/// A plugin version as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PluginOut {
    pub name: String,
    pub version: i32,
    pub sha256: String,
    pub world: String,
    /// The hosts it may reach, as installed (`scheme://host[:port]` patterns).
    pub grants: Value,
    pub limits: Value,
    pub size_bytes: i64,
    #[serde(serialize_with = "super::timestamp")]
    pub created_at: DateTime<Utc>,
    /// On install: the interfaces the component exports and imports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exports: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imports: Option<Vec<String>>,
    /// On `GET /plugins/{name}`: every installed version, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(no_recursion)]
    pub versions: Option<Vec<PluginOut>>,
}

impl From<&PluginRecord> for PluginOut {
    fn from(p: &PluginRecord) -> Self {
        Self {
            name: p.name.clone(),
            version: p.version,
            sha256: p.sha256.clone(),
            world: p.world.clone(),
            grants: p.grants.clone(),
            limits: p.limits.clone(),
            size_bytes: p.size_bytes,
            created_at: p.created_at,
            exports: None,
            imports: None,
            versions: None,
        }
    }
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::PluginNotFound, format!("Plugin '{name}' is not installed."))
}

/// Plugin uploads compiled at once, per process; the others wait.
const COMPILES_AT_ONCE: usize = 2;
static COMPILES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(COMPILES_AT_ONCE);

/// Install a plugin, or a new version of one: the body is the WebAssembly component.
///
/// The component is compiled and type-checked first; its world (transport or renderer) must
/// stay the same across versions. The same bytes, grants and limits again answer 200.
#[utoipa::path(post, path = "/plugins", tag = "plugins",
    params(
        ("name" = String, Query, description = "The plugin's name."),
        ("world" = Option<String>, Query, description = "`transport-plugin`, `renderer-plugin`, `classifier-plugin` or `schedule-plugin`: refused if the component implements the other."),
        ("allow_host" = Option<Vec<String>>, Query, description = "A URL pattern `scheme://host[:port]` it may call, `*` per part; repeat for more."),
        ("memory_mb" = Option<u32>, Query, description = "Its linear memory limit in MiB (default 64, at most TE_PLUGIN_MEMORY_MB_MAX)."),
        ("calls_per_instance" = Option<u32>, Query, description = "Transport plugins: deliveries one instance may make, one after another and all for one endpoint version, before a fresh one replaces it (default 1: a fresh instance for every delivery; at most 1000). More is faster, but what the plugin keeps in memory then outlives a delivery."),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The component's bytes (any content type is accepted; `application/wasm` is usual)."),
    responses(
        (status = 201, description = "Installed as a new version.", body = PluginOut),
        (status = 200, description = "The newest version already has these bytes, grants and limits.", body = PluginOut),
    ))]
async fn install(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    ApiBytes(body): ApiBytes,
) -> ApiResult<Created<PluginOut>> {
    let host = state.plugins.clone();
    let (mut name, mut world, mut allow, mut asked) = (None, None, Vec::new(), InstallLimits::default());
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "name" => name = Some(value.into_owned()),
            "world" => {
                world = Some(World::parse(&value).ok_or_else(|| {
                    ApiError::invalid_field(
                        "world",
                        "must be transport-plugin, renderer-plugin, classifier-plugin or schedule-plugin",
                    )
                })?)
            }
            "allow_host" => allow.push(value.into_owned()),
            "memory_mb" => {
                asked.memory_mb = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| ApiError::invalid_field("memory_mb", "must be a whole number of MiB"))?,
                )
            }
            "calls_per_instance" => {
                asked.calls_per_instance = Some(value.parse::<u32>().map_err(|_| {
                    ApiError::invalid_field("calls_per_instance", "must be a whole number of deliveries")
                })?)
            }
            other => {
                return Err(ApiError::invalid_field(
                    other,
                    "is not a parameter of POST /plugins (name, world, allow_host, memory_mb, calls_per_instance)",
                ))
            }
        }
    }
    let name = name.ok_or_else(|| ApiError::invalid_field("name", "is required (?name=…)"))?;
    check_name("name", &name)?;
    Grants::parse(&allow).map_err(|e| ApiError::invalid_field("allow_host", e))?;
    let limits = PluginLimits::for_install(asked, host.runtime.memory_mb_max)
        .map_err(|e| ApiError::invalid_field(e.field, e.message))?;
    if body.is_empty() {
        return Err(ApiError::invalid_request("The request body must be the component's bytes."));
    }
    let sha256: String = Sha256::digest(&body).iter().map(|b| format!("{b:02x}")).collect();

    // Compiling is CPU-bound and can take seconds and hundreds of MiB: keep it off the async
    // workers, and at most COMPILES_AT_ONCE at a time (further uploads wait their turn).
    let _turn = COMPILES.acquire().await.map_err(|e| ApiError::internal(&e))?;
    let runtime = host.runtime.clone();
    let bytes = body.to_vec();
    let inspected = tokio::task::spawn_blocking(move || runtime.inspect(&bytes, world).map(|(i, _)| i))
        .await
        .map_err(|e| ApiError::internal(&e))?
        .map_err(|e| ApiError::new(ErrorCode::InvalidPlugin, e.to_string()))?;
    drop(_turn);
    if limits.reuses_instances() && inspected.world != World::Transport {
        return Err(ApiError::invalid_field(
            "calls_per_instance",
            format!(
                "applies to transport plugins only; this component is a {}, which gets a fresh instance for every call",
                inspected.world.as_str()
            ),
        ));
    }

    if let Some(current) = state.store.plugin_latest(&name).await? {
        let same_grants = current.grants == json!(allow);
        // Compared as limits, not JSON: a version stored before a limit existed has its default.
        let same_limits = serde_json::from_value::<PluginLimits>(current.limits.clone()).ok() == Some(limits);
        if current.sha256 == sha256 && same_grants && same_limits {
            return Ok(Created(StatusCode::OK, PluginOut::from(&current)));
        }
        if current.world != inspected.world.as_str() {
            return Err(ApiError::new(
                ErrorCode::InvalidPlugin,
                format!(
                    "plugin '{name}' is a {}; a new version cannot be a {}",
                    current.world,
                    inspected.world.as_str()
                ),
            ));
        }
    }
    let record = state
        .store
        .plugin_insert(&PluginWrite {
            name,
            sha256,
            bytes: body.to_vec(),
            world: inspected.world.as_str().to_owned(),
            grants: json!(allow),
            limits: serde_json::to_value(limits).expect("limits serialize"),
        })
        .await?;
    host.versions_changed().await;
    let out =
        PluginOut { exports: Some(inspected.exports), imports: Some(inspected.imports), ..PluginOut::from(&record) };
    Ok(Created(StatusCode::CREATED, out))
}

/// List installed plugins (each one's newest version), oldest first.
#[utoipa::path(get, path = "/plugins", tag = "plugins", params(ListParams), responses(
    (status = 200, description = "A page, oldest first.", body = ListOut<PluginOut>),
))]
async fn list(
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<PluginOut>>> {
    let page = params.page_request()?;
    let rows = state.store.plugin_list(&page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |p| PageKey { created_at: p.created_at, key: p.name.clone() },
        |p| PluginOut::from(&p),
    )))
}

/// Read a plugin: its newest version, with every version listed.
#[utoipa::path(get, path = "/plugins/{name}", tag = "plugins", params(("name" = String, Path)), responses(
    (status = 200, description = "The newest version, with `versions`.", body = PluginOut),
))]
async fn read(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<PluginOut>> {
    let versions = state.store.plugin_versions(&name).await?;
    let latest = versions.last().ok_or_else(|| not_found(&name))?;
    Ok(Json(PluginOut { versions: Some(versions.iter().map(PluginOut::from).collect()), ..PluginOut::from(latest) }))
}

/// 409 for a plugin (or a version) that endpoints or cron jobs use (`users`: their stored
/// names). Plugins are shared by every tenant, and so are what uses them: an operator key is
/// shown every user (another tenant's named with its tenant), a tenant's key its own tenant's
/// and how many others there are.
fn in_use(caller: &Caller, what: &str, users: &[String]) -> ApiError {
    let scope = match caller {
        Caller::Operator => return conflict_in_use(what, "endpoints or cron jobs", &Scope::default(), users),
        Caller::Tenant(key) => Scope::new(&key.tenant),
    };
    let (own, others): (Vec<String>, Vec<String>) = users.iter().cloned().partition(|u| scope.owns(u));
    let kind = match others.len() {
        0 => "endpoints or cron jobs".to_owned(),
        n => format!("endpoints or cron jobs ({n} of them other tenants')"),
    };
    conflict_in_use(what, &kind, &scope, &own)
}

/// Remove a plugin, every version, when no endpoint uses it.
#[utoipa::path(delete, path = "/plugins/{name}", tag = "plugins", params(("name" = String, Path)), responses(
    (status = 204, description = "Removed."),
))]
async fn remove(State(state): State<AppState>, caller: Caller, Path(name): Path<String>) -> ApiResult<StatusCode> {
    match state.store.plugin_delete(&name).await? {
        Deleted::Deleted => {
            state.plugins.versions_changed().await;
            Ok(StatusCode::NO_CONTENT)
        }
        Deleted::NotFound => Err(not_found(&name)),
        Deleted::InUse(endpoints) => Err(in_use(&caller, &format!("Plugin '{name}'"), &endpoints)),
    }
}

/// Remove one version of a plugin.
///
/// Refused (`409`, naming them) while an endpoint is pinned to that version (`plugin@N`), or,
/// when it is the last version, while any endpoint uses the plugin. Removing the newest
/// version makes the one before it the newest: endpoints that are not pinned use it from
/// their next delivery.
#[utoipa::path(delete, path = "/plugins/{name}/versions/{version}", tag = "plugins",
    params(("name" = String, Path), ("version" = i32, Path, description = "The version to remove.")),
    responses((status = 204, description = "Removed.")))]
async fn remove_version(
    State(state): State<AppState>,
    caller: Caller,
    Path((name, version)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    // Parsed here, not by the extractor: its refusal would be plain text, not the error shape.
    let version: i32 =
        version.parse().ok().filter(|v| *v >= 1).ok_or_else(|| {
            ApiError::invalid_field("version", format!("must be a whole number from 1, got '{version}'"))
        })?;
    match state.store.plugin_version_delete(&name, version).await? {
        Deleted::Deleted => {
            state.plugins.versions_changed().await;
            Ok(StatusCode::NO_CONTENT)
        }
        Deleted::NotFound => {
            Err(ApiError::new(ErrorCode::PluginNotFound, format!("Plugin '{name}' has no version {version}.")))
        }
        Deleted::InUse(endpoints) => Err(in_use(&caller, &format!("Version {version} of plugin '{name}'"), &endpoints)),
    }
}

/// `POST /plugins/{name}/rollback`: which version to bring back (`{}` for the one before the
/// newest).
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackIn {
    /// The version to bring back (default: the one before the newest).
    pub to: Option<i32>,
}

/// Roll a plugin back: install an earlier version's component, grants and limits again, as
/// the newest version.
///
/// History is kept: the bad version stays listed (remove it with
/// `DELETE /plugins/{name}/versions/{version}`), and endpoints that are not pinned use the
/// new newest version from their next delivery.
#[utoipa::path(post, path = "/plugins/{name}/rollback", tag = "plugins", params(("name" = String, Path)),
    request_body = RollbackIn,
    responses((status = 201, description = "The earlier version, installed again as the newest.", body = PluginOut)))]
async fn rollback(
    State(state): State<AppState>,
    Path(name): Path<String>,
    super::extract::ApiJson(RollbackIn { to }): super::extract::ApiJson<RollbackIn>,
) -> ApiResult<Created<PluginOut>> {
    let versions = state.store.plugin_versions(&name).await?;
    let newest = versions.last().ok_or_else(|| not_found(&name))?;
    let target = match to {
        Some(version) => versions
            .iter()
            .find(|v| v.version == version)
            .ok_or_else(|| ApiError::invalid_field("to", format!("plugin '{name}' has no version {version}")))?,
        None => versions.iter().rev().nth(1).ok_or_else(|| {
            ApiError::new(
                ErrorCode::Conflict,
                format!("Plugin '{name}' has only version {}: there is nothing to roll back to.", newest.version),
            )
        })?,
    };
    if target.version == newest.version {
        return Err(ApiError::invalid_field("to", format!("version {} is already the newest", target.version)));
    }
    let bytes = state.store.plugin_bytes(&name, target.version).await?.ok_or_else(|| {
        ApiError::new(ErrorCode::PluginNotFound, format!("Plugin '{name}' has no version {}.", target.version))
    })?;
    let record = state
        .store
        .plugin_insert(&PluginWrite {
            name: name.clone(),
            sha256: target.sha256.clone(),
            bytes,
            world: target.world.clone(),
            grants: target.grants.clone(),
            limits: target.limits.clone(),
        })
        .await?;
    state.plugins.versions_changed().await;
    Ok(Created(StatusCode::CREATED, PluginOut::from(&record)))
}
