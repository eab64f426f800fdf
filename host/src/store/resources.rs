//! The setup documents as stored: payload specs, configs, secrets (their envelopes only) and
//! endpoints, with an endpoint's write.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::domain::Scope;

/// A row as a tenant sees it: each name it holds without the tenant (`domain::tenant`). The
/// store holds and returns stored names; the API shows them through this.
pub trait ShownTo {
    fn shown_to(self, scope: &Scope) -> Self;
}

impl ShownTo for PayloadSpec {
    fn shown_to(mut self, scope: &Scope) -> Self {
        self.name = scope.shown(&self.name);
        self
    }
}

impl ShownTo for Config {
    fn shown_to(mut self, scope: &Scope) -> Self {
        self.name = scope.shown(&self.name);
        self
    }
}

impl ShownTo for Secret {
    fn shown_to(mut self, scope: &Scope) -> Self {
        self.name = scope.shown(&self.name);
        self
    }
}

impl ShownTo for Endpoint {
    fn shown_to(mut self, scope: &Scope) -> Self {
        self.name = scope.shown(&self.name);
        self.payload_spec = scope.shown_opt(self.payload_spec.as_deref());
        self.config = scope.shown_opt(self.config.as_deref());
        self.on_failure = scope.shown_opt(self.on_failure.as_deref());
        self
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PayloadSpec {
    pub name: String,
    #[sqlx(rename = "schema_json", json)]
    pub schema: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Config {
    pub name: String,
    #[sqlx(rename = "values_json", json)]
    pub values: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A secret as stored: only ever the encrypted envelope (see `crate::secret`).
#[derive(Clone, sqlx::FromRow)]
pub struct Secret {
    pub name: String,
    pub encrypted_value: Vec<u8>,
    /// Where the secret may be sent, as JSON (`secret::hosts::AllowedHosts`); None: anywhere.
    pub allowed_hosts: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret").field("name", &self.name).finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Endpoint {
    pub name: String,
    pub endpoint_type: crate::domain::EndpointType,
    #[sqlx(rename = "payload_spec_ref")]
    pub payload_spec: Option<String>,
    #[sqlx(rename = "config_ref")]
    pub config: Option<String>,
    #[sqlx(json)]
    pub spec: Value,
    #[sqlx(json)]
    pub retry_policy: Value,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The transport plugin of a PLUGIN endpoint.
    pub plugin: Option<String>,
    /// A renderer plugin used in place of the built-in renderer.
    pub renderer: Option<String>,
    /// The most deliveries of this endpoint run at once by all workers (unset: fair shares).
    pub max_concurrency: Option<i32>,
    /// The endpoint told of this endpoint's failed executions (always the current one's).
    pub on_failure: Option<String>,
    /// No execution of it is claimed before this time (a receiver's 429 Retry-After).
    pub paused_until: Option<DateTime<Utc>>,
    /// Deliveries per second across all workers, and the bucket's burst (both or neither).
    pub rate_limit_per_sec: Option<f64>,
    pub rate_limit_burst: Option<i32>,
    /// The circuit breaker's settings (None: the defaults) and state (see `flow::circuit`).
    #[sqlx(json(nullable))]
    pub circuit_policy: Option<crate::flow::CircuitPolicy>,
    pub circuit_failures: i32,
    pub circuit_failing_since: Option<DateTime<Utc>>,
    pub circuit_open_until: Option<DateTime<Utc>>,
    pub circuit_cooldown_ms: Option<i64>,
    pub circuit_last_error: Option<String>,
    pub disabled_at: Option<DateTime<Utc>>,
    /// Paused by its owner since (`POST /endpoints/{name}/pause`): nothing is claimed until
    /// it is resumed.
    pub paused_at: Option<DateTime<Utc>>,
    /// The delivery timeout set on the endpoint itself (every type; None: the spec's own
    /// `timeout_ms`, or the default).
    pub timeout_ms: Option<i32>,
    /// The plugin version a PLUGIN endpoint is pinned to (None: the newest).
    pub plugin_version: Option<i32>,
    /// The classifier plugin that judges this endpoint's answers, its pinned version and its
    /// configuration (see `worker::classify`).
    pub classifier: Option<String>,
    pub classifier_version: Option<i32>,
    #[sqlx(json(nullable))]
    pub classifier_config: Option<Value>,
    /// Its concurrency key (`flow::concurrency`): always the endpoint's as it is now, like
    /// its other flow control.
    #[sqlx(json(nullable))]
    pub concurrency: Option<crate::flow::Concurrency>,
}

impl Endpoint {
    pub fn rate_limit(&self) -> Option<crate::flow::RateLimit> {
        let (per_second, burst) = (self.rate_limit_per_sec?, self.rate_limit_burst?);
        Some(crate::flow::RateLimit { per_second, burst: u32::try_from(burst).unwrap_or(1) })
    }

    /// The plugin a PLUGIN endpoint delivers through, pinned or not.
    pub fn plugin_ref(&self) -> Option<crate::domain::PluginRef> {
        self.plugin.as_ref().map(|name| crate::domain::PluginRef { name: name.clone(), version: self.plugin_version })
    }

    /// The classifier plugin that judges this endpoint's answers, pinned or not.
    pub fn classifier_ref(&self) -> Option<crate::domain::PluginRef> {
        self.classifier
            .as_ref()
            .map(|name| crate::domain::PluginRef { name: name.clone(), version: self.classifier_version })
    }

    /// The circuit breaker's settings: the endpoint's own, or the defaults.
    pub fn circuit_policy(&self) -> crate::flow::CircuitPolicy {
        self.circuit_policy.unwrap_or_default()
    }

    /// The circuit breaker's state as stored.
    pub fn circuit(&self) -> crate::flow::CircuitState {
        crate::flow::CircuitState {
            failures: self.circuit_failures,
            failing_since: self.circuit_failing_since,
            open_until: self.circuit_open_until,
            cooldown_ms: self.circuit_cooldown_ms,
            last_error: self.circuit_last_error.clone(),
            disabled_at: self.disabled_at,
        }
    }
}

/// Everything an endpoint create or update writes.
#[derive(Debug, Clone)]
pub struct EndpointWrite {
    pub name: String,
    pub endpoint_type: crate::domain::EndpointType,
    pub payload_spec: Option<String>,
    pub config: Option<String>,
    pub spec: Value,
    pub retry_policy: Value,
    /// The secrets the spec's templates name; kept so a secret in use cannot be deleted.
    pub secret_refs: Vec<String>,
    pub plugin: Option<String>,
    pub renderer: Option<String>,
    pub max_concurrency: Option<i32>,
    pub on_failure: Option<String>,
    pub rate_limit: Option<crate::flow::RateLimit>,
    /// None: the defaults.
    pub circuit_policy: Option<crate::flow::CircuitPolicy>,
    pub timeout_ms: Option<i32>,
    pub plugin_version: Option<i32>,
    /// The classifier plugin (pinned to a version or not) and its configuration.
    pub classifier: Option<crate::domain::PluginRef>,
    pub classifier_config: Option<Value>,
    pub concurrency: Option<crate::flow::Concurrency>,
}
