//! `/endpoints`: registered delivery targets. Registration checks everything that can be
//! checked before the first fire: the spec's shape per transport, the retry policy, that the
//! payload spec and config exist, that every template parses, and that every `{{config.*}}`
//! key and `{{secret.*}}` name it uses resolves.

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
use super::state::AppState;
use super::{check_path_name, conflict_in_use, created_or_existing, Created};
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::domain::Scope;
use crate::plugin::{PluginRef, World};
use crate::retry::RetryPolicy;
use crate::store::{Deleted, Endpoint, EndpointWrite, PageKey, ShownTo, StoreError};
use crate::template;
use crate::transport::EndpointType;

mod classifier;
mod flow;

pub use classifier::ClassifierIn;
use flow::{CircuitBreakerIn, CircuitBreakerOut, CircuitOut, ConcurrencyIn, RateLimitIn};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(read, update, delete))
        .routes(routes!(flow::enable))
        .routes(routes!(flow::pause))
        .routes(routes!(flow::resume))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointIn {
    /// Required on create; on update optional, and when sent it must match the path.
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub endpoint_type: EndpointType,
    pub payload_spec: Option<String>,
    pub config: Option<String>,
    pub spec: Value,
    pub retry_policy: Option<Value>,
    /// The transport plugin of a PLUGIN endpoint: `name` (its newest version at each
    /// delivery) or `name@3` (pinned to version 3 whatever is installed after it).
    pub plugin: Option<String>,
    /// A renderer plugin to use in place of the built-in renderer.
    pub renderer: Option<String>,
    /// The most deliveries of this endpoint run at once, by all workers together.
    pub max_concurrency: Option<u32>,
    /// An endpoint to tell when an execution of this one fails: a job is created for it with
    /// the failure's summary as input.
    pub on_failure: Option<String>,
    /// The most deliveries a second, by all workers together.
    pub rate_limit: Option<RateLimitIn>,
    /// When to stop sending to a failing receiver, and for how long (defaults: open after 5
    /// consecutive failures for 30 s, doubling to 10 minutes; never disabled).
    pub circuit_breaker: Option<CircuitBreakerIn>,
    /// How long one delivery may take, in milliseconds (1 to 300,000), for every endpoint
    /// type. Default: the spec's own `timeout_ms` (the built-in transports' specs have one:
    /// 10,000 for HTTP and Kafka, 3,000 for Redis), else 30,000.
    pub timeout_ms: Option<u64>,
    /// A classifier plugin that judges the receiver's answer after each delivery and may
    /// overrule the transport: success, retry (after a delay), permanent failure, or open the
    /// circuit. For receivers that answer 200 with an error in the body, say.
    pub classifier: Option<ClassifierIn>,
    /// At most `max_in_flight` executions of one key in flight across all workers, the key
    /// made of each job's input (`{"key": "{{input.customer_id}}", "max_in_flight": 2}`);
    /// with `"ordering": "fifo"`, one key's executions one at a time in the order their jobs
    /// fire.
    pub concurrency: Option<ConcurrencyIn>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EndpointOut {
    pub name: String,
    #[serde(rename = "type")]
    pub endpoint_type: EndpointType,
    pub payload_spec: Option<String>,
    pub config: Option<String>,
    pub spec: Value,
    pub retry_policy: Value,
    /// Increases by one on every update.
    pub version: i32,
    /// How long one delivery may take, in milliseconds, as it applies.
    pub timeout_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renderer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classifier: Option<ClassifierIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<ConcurrencyIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitIn>,
    /// While a receiver's 429 Retry-After holds: no delivery of this endpoint starts before.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "super::optional_timestamp")]
    pub paused_until: Option<DateTime<Utc>>,
    /// The circuit breaker's settings, defaults filled in.
    pub circuit_breaker: CircuitBreakerOut,
    /// The circuit breaker's state now.
    pub circuit: CircuitOut,
    /// Set while the endpoint is disabled (it failed for longer than
    /// `circuit_breaker.auto_disable_after`): nothing is delivered until
    /// `POST /endpoints/{name}/enable`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "super::optional_timestamp")]
    pub disabled_at: Option<DateTime<Utc>>,
    /// Set while the endpoint is paused (`POST /endpoints/{name}/pause`, since this time):
    /// nothing is delivered until `POST /endpoints/{name}/resume`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "super::optional_timestamp")]
    pub paused_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "super::timestamp")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "super::timestamp")]
    pub updated_at: DateTime<Utc>,
}

impl From<Endpoint> for EndpointOut {
    fn from(e: Endpoint) -> Self {
        let rate_limit = e.rate_limit().map(|r| RateLimitIn { per_second: r.per_second, burst: Some(r.burst) });
        let now = crate::store::now();
        let circuit_breaker = CircuitBreakerOut::from(e.circuit_policy());
        let circuit = CircuitOut::new(&e.circuit(), now);
        let timeout_ms = crate::transport::delivery_timeout_ms(&e, &e.spec);
        let plugin = e.plugin_ref().map(|p| p.to_string());
        let classifier = ClassifierIn::of(&e);
        Self {
            name: e.name,
            endpoint_type: e.endpoint_type,
            payload_spec: e.payload_spec,
            config: e.config,
            spec: e.spec,
            retry_policy: e.retry_policy,
            version: e.version,
            timeout_ms,
            plugin,
            renderer: e.renderer,
            classifier,
            max_concurrency: e.max_concurrency,
            concurrency: e.concurrency.map(ConcurrencyIn::from),
            rate_limit,
            on_failure: e.on_failure,
            // Shown only while it holds.
            paused_until: e.paused_until.filter(|t| *t > now),
            circuit_breaker,
            circuit,
            disabled_at: e.disabled_at,
            paused_at: e.paused_at,
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

/// The largest `max_concurrency`: the most slots a worker can have (`TE_WORKER_MAX_CONCURRENT`).
const MAX_CONCURRENCY_LIMIT: u32 = 10_000;

pub(super) fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorCode::EndpointNotFound, format!("Endpoint '{name}' does not exist."))
}

/// A reference vanished between our checks and the write (the foreign keys caught it).
fn reference_race() -> ApiError {
    ApiError::conflict("A payload spec, config or secret this endpoint refers to was deleted while it was being saved; check the references and retry.")
}

/// The plugin `plugin` names is installed (that version, when it names one) and implements
/// `world`; 422 INVALID_PLUGIN_REF otherwise.
pub(crate) async fn require_plugin(state: &AppState, field: &str, plugin: &PluginRef, world: World) -> ApiResult<()> {
    let name = plugin.name.as_str();
    let found = match plugin.version {
        None => state.store.plugin_latest(name).await?,
        Some(version) => {
            let versions = state.store.plugin_versions(name).await?;
            let listed: Vec<String> = versions.iter().map(|v| v.version.to_string()).collect();
            match versions.into_iter().find(|v| v.version == version) {
                Some(found) => Some(found),
                None if !listed.is_empty() => {
                    return Err(ApiError::new(
                        ErrorCode::InvalidPluginRef,
                        format!(
                            "`{field}`: plugin '{name}' has no version {version} (installed: {})",
                            listed.join(", ")
                        ),
                    ))
                }
                None => None,
            }
        }
    };
    match found {
        Some(p) if p.world == world.as_str() => Ok(()),
        Some(p) => Err(ApiError::new(ErrorCode::InvalidPluginRef,
            format!("`{field}`: plugin '{name}' is a {}, not a {}", p.world, world.as_str()),
        )),
        None => Err(ApiError::new(ErrorCode::InvalidPluginRef,
            format!("`{field}`: no plugin named '{name}'; install it with `taskexec plugin install` or POST /plugins first."),
        )),
    }
}

/// `timeout_ms` within 1 ms and the longest a delivery may take: the built-in specs' own check.
fn check_timeout(timeout_ms: u64) -> ApiResult<i32> {
    crate::transport::check_timeout("timeout_ms", timeout_ms, crate::transport::MAX_TIMEOUT_MS)
        .map_err(|e| ApiError::invalid_field(&e.field, e.message))?;
    Ok(i32::try_from(timeout_ms).expect("at most MAX_TIMEOUT_MS"))
}

/// A callback (`field`: `on_failure`, `on_success`) names an endpoint of the caller's tenant
/// that exists: 422 INVALID_ENDPOINT_REF naming the field otherwise.
pub async fn require_callback(state: &AppState, scope: &Scope, field: &str, name: &str) -> ApiResult<()> {
    match state.store.endpoint_get(&scope.stored(name)).await? {
        Some(_) => Ok(()),
        None => Err(ApiError::new(
            ErrorCode::InvalidEndpointRef,
            format!("`{field}`: no endpoint named '{name}'; register it first."),
        )),
    }
}

/// Every check of registration; on success, what the store should write: every name in it
/// (its own, its payload spec's, config's, secrets' and `on_failure`'s) as stored for the
/// caller's tenant.
async fn prepare(state: &AppState, scope: &Scope, name: String, body: EndpointIn) -> ApiResult<EndpointWrite> {
    let rate_limit = body.rate_limit.as_ref().map(flow::check_rate_limit).transpose()?;
    let concurrency = body.concurrency.map(flow::check_concurrency).transpose()?;
    let circuit_policy = body.circuit_breaker.as_ref().map(flow::check_circuit_breaker).transpose()?;
    if let Some(target) = &body.on_failure {
        if *target == name {
            return Err(ApiError::invalid_field(
                "on_failure",
                "names the endpoint itself: its failures would be told to the endpoint that failed",
            ));
        }
        require_callback(state, scope, "on_failure", target).await?;
    }
    let max_concurrency = match body.max_concurrency {
        None => None,
        Some(n @ 1..=MAX_CONCURRENCY_LIMIT) => Some(i32::try_from(n).expect("at most 10,000")),
        Some(n) => {
            return Err(ApiError::invalid_field(
                "max_concurrency",
                format!("must be between 1 and {MAX_CONCURRENCY_LIMIT}, got {n}"),
            ))
        }
    };
    if body.endpoint_type != EndpointType::Plugin && body.plugin.is_some() {
        return Err(ApiError::invalid_field("plugin", "applies only to endpoints of type PLUGIN"));
    }
    let plugin = match (body.endpoint_type, body.plugin.as_deref()) {
        (EndpointType::Plugin, None) => {
            return Err(ApiError::invalid_field("plugin", "is required for a PLUGIN endpoint"))
        }
        (EndpointType::Plugin, Some(text)) => {
            let plugin = PluginRef::parse(text).map_err(|e| ApiError::invalid_field("plugin", e))?;
            require_plugin(state, "plugin", &plugin, World::Transport).await?;
            Some(plugin)
        }
        _ => None,
    };
    if let Some(renderer) = &body.renderer {
        let renderer = PluginRef { name: renderer.clone(), version: None };
        require_plugin(state, "renderer", &renderer, World::Renderer).await?;
    }
    let (classifier, classifier_config) = match &body.classifier {
        None => (None, None),
        Some(given) => {
            let (plugin, config) = classifier::check(state, given).await?;
            (Some(plugin), config)
        }
    };
    let timeout_ms = body.timeout_ms.map(check_timeout).transpose()?;
    let mut spec = body.spec.clone();
    if let (Some(timeout), false) = (timeout_ms, body.endpoint_type == EndpointType::Plugin) {
        // A built-in transport reads its spec's `timeout_ms`: the endpoint's is written there.
        match spec.get("timeout_ms") {
            Some(given) if given.as_i64() != Some(i64::from(timeout)) => {
                return Err(ApiError::invalid_field(
                    "timeout_ms",
                    format!("is {timeout} but `spec.timeout_ms` is {given}: give one of them"),
                ))
            }
            _ => {
                if let Some(object) = spec.as_object_mut() {
                    object.insert("timeout_ms".to_owned(), Value::from(timeout));
                }
            }
        }
    }
    let transport = state
        .transports
        .for_endpoint(body.endpoint_type, plugin.as_ref())
        .map_err(|e| ApiError::invalid_field(&e.field, e.message))?;
    let spec = transport.validate(&spec).await.map_err(|e| {
        if body.endpoint_type == EndpointType::Plugin {
            ApiError::new(ErrorCode::InvalidSpec, format!("`{}`: {}", e.field, e.message))
        } else {
            ApiError::invalid_field(&e.field, e.message)
        }
    })?;
    let retry_policy =
        RetryPolicy::parse(body.retry_policy.as_ref()).map_err(|e| ApiError::invalid_field(&e.field, e.message))?;

    if let Some(spec_name) = &body.payload_spec {
        if state.store.payload_spec_get(&scope.stored(spec_name)).await?.is_none() {
            return Err(ApiError::new(
                ErrorCode::InvalidPayloadSpecRef,
                format!(
                    "`payload_spec`: no payload spec named '{spec_name}'; create it with POST /payload-specs first."
                ),
            ));
        }
    }
    let config = match &body.config {
        None => None,
        Some(config_name) => Some(state.store.config_get(&scope.stored(config_name)).await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidConfigRef,
                format!("`config`: no config named '{config_name}'; create it with POST /configs first."),
            )
        })?),
    };

    let refs = state
        .renderers
        .for_endpoint(body.renderer.as_deref())
        .check("spec", &spec)
        .await
        .map_err(|e| ApiError::new(ErrorCode::InvalidTemplate, format!("`{}`: {}", e.field, e.message)))?;
    for path in &refs.config_paths {
        let unresolvable =
            |why: String| ApiError::new(ErrorCode::TemplateResolutionFailed, format!("{{{{config.{path}}}}}: {why}"));
        match &config {
            None => return Err(unresolvable("the endpoint names no `config`".into())),
            Some(config) if template::lookup_path(&config.values, path).is_none() => {
                return Err(unresolvable(format!("config '{}' has no key `{path}`", scope.shown(&config.name))))
            }
            Some(_) => {}
        }
    }
    let wanted: Vec<String> = refs.secrets.into_iter().collect();
    let stored: Vec<String> = wanted.iter().map(|s| scope.stored(s).into_owned()).collect();
    let existing = state.store.secret_names_existing(&stored).await?;
    if let Some((missing, _)) = wanted.iter().zip(&stored).find(|(_, s)| !existing.contains(s)) {
        return Err(ApiError::new(
            ErrorCode::TemplateResolutionFailed,
            format!("{{{{secret.{missing}}}}}: no secret named '{missing}'; create it with POST /secrets first."),
        ));
    }

    Ok(EndpointWrite {
        name: scope.stored(&name).into_owned(),
        endpoint_type: body.endpoint_type,
        payload_spec: scope.stored_opt(body.payload_spec.as_deref()),
        config: scope.stored_opt(body.config.as_deref()),
        spec,
        retry_policy: serde_json::to_value(retry_policy).expect("a retry policy serializes"),
        secret_refs: stored,
        plugin: plugin.as_ref().map(|p| p.name.clone()),
        plugin_version: plugin.and_then(|p| p.version),
        timeout_ms,
        renderer: body.renderer,
        max_concurrency,
        on_failure: scope.stored_opt(body.on_failure.as_deref()),
        rate_limit,
        circuit_policy,
        classifier,
        classifier_config,
        concurrency,
    })
}

/// Register an endpoint: where and how jobs deliver (HTTP, KAFKA, REDIS_STREAM or PLUGIN).
#[utoipa::path(post, path = "/endpoints", tag = "endpoints", request_body = EndpointIn, responses(
    (status = 201, description = "Created.", body = EndpointOut),
    (status = 200, description = "The same endpoint already existed (an idempotent repeat).", body = EndpointOut),
))]
async fn create(
    State(state): State<AppState>,
    scope: Scope,
    ApiJson(body): ApiJson<EndpointIn>,
) -> ApiResult<Created<EndpointOut>> {
    let name = body.name.clone().ok_or_else(|| ApiError::invalid_field("name", "is required"))?;
    check_name("name", &name)?;
    let write = prepare(&state, &scope, name.clone(), body).await?;
    state.quotas.endpoint_added(&*state.store, scope.tenant(), &write.name).await?;
    let inserted = match state.store.endpoint_insert(&write).await {
        Err(StoreError::ForeignKeyViolation) => return Err(reference_race()),
        other => other?,
    };
    created_or_existing(
        inserted,
        &scope,
        |e| {
            e.endpoint_type == write.endpoint_type
                && e.payload_spec == write.payload_spec
                && e.config == write.config
                && e.spec == write.spec
                && e.retry_policy == write.retry_policy
                && e.plugin == write.plugin
                && e.renderer == write.renderer
                && e.max_concurrency == write.max_concurrency
                && e.on_failure == write.on_failure
                && e.rate_limit() == write.rate_limit
                && e.circuit_policy == write.circuit_policy
                && e.timeout_ms == write.timeout_ms
                && e.plugin_version == write.plugin_version
                && e.classifier_ref() == write.classifier
                && e.classifier_config == write.classifier_config
                && e.concurrency == write.concurrency
        },
        || {
            format!(
                "Endpoint '{name}' already exists with a different definition; change it with PUT /endpoints/{name}."
            )
        },
    )
}

/// List endpoints, oldest first.
#[utoipa::path(get, path = "/endpoints", tag = "endpoints", params(ListParams), responses(
    (status = 200, description = "A page, oldest first.", body = ListOut<EndpointOut>),
))]
async fn list(
    State(state): State<AppState>,
    scope: Scope,
    ApiQuery(params): ApiQuery<ListParams>,
) -> ApiResult<Json<ListOut<EndpointOut>>> {
    let page = params.page_request()?;
    let rows = state.store.endpoint_list(scope.tenant(), &page).await?;
    Ok(Json(paginate(
        rows,
        &page,
        |r| PageKey { created_at: r.created_at, key: r.name.clone() },
        |r| r.shown_to(&scope).into(),
    )))
}

/// Read an endpoint.
#[utoipa::path(get, path = "/endpoints/{name}", tag = "endpoints", params(("name" = String, Path)), responses(
    (status = 200, description = "The endpoint.", body = EndpointOut),
))]
async fn read(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<Json<EndpointOut>> {
    let endpoint = state.store.endpoint_get(&scope.stored(&name)).await?.ok_or_else(|| not_found(&name))?;
    Ok(Json(endpoint.shown_to(&scope).into()))
}

/// Replace an endpoint (a new version; jobs keep the version they were created with).
///
/// Replaces the whole definition (a new `version`); jobs created afterwards use it.
#[utoipa::path(put, path = "/endpoints/{name}", tag = "endpoints", params(("name" = String, Path)), request_body = EndpointIn, responses(
    (status = 200, description = "The endpoint as it now is.", body = EndpointOut),
))]
async fn update(
    State(state): State<AppState>,
    scope: Scope,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<EndpointIn>,
) -> ApiResult<Json<EndpointOut>> {
    check_path_name(&name, body.name.as_deref())?;
    if state.store.endpoint_get(&scope.stored(&name)).await?.is_none() {
        return Err(not_found(&name));
    }
    let write = prepare(&state, &scope, name.clone(), body).await?;
    let updated = match state.store.endpoint_update(&write).await {
        Err(StoreError::ForeignKeyViolation) => return Err(reference_race()),
        other => other?,
    };
    Ok(Json(updated.ok_or_else(|| not_found(&name))?.shown_to(&scope).into()))
}

/// Delete an endpoint no job still delivers through, with its finished jobs and their history.
///
/// Refused while an active cron job, or a job with an unfinished execution, uses it.
#[utoipa::path(delete, path = "/endpoints/{name}", tag = "endpoints", params(("name" = String, Path)), responses(
    (status = 204, description = "Deleted."),
))]
async fn delete(State(state): State<AppState>, scope: Scope, Path(name): Path<String>) -> ApiResult<StatusCode> {
    match state.store.endpoint_delete(&scope.stored(&name)).await? {
        Deleted::Deleted => Ok(StatusCode::NO_CONTENT),
        Deleted::NotFound => Err(not_found(&name)),
        Deleted::InUse(jobs) => Err(conflict_in_use(&format!("Endpoint '{name}'"), "jobs", &scope, &jobs)),
    }
}
