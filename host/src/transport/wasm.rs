//! A transport plugin behind the [`Transport`] trait: the worker delivers through it as through
//! the built-in transports. Each delivery runs the plugin's newest version, or the version the
//! endpoint is pinned to (`plugin@3`); the version that ran is logged with the attempt.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{error_json, Delivery, SpecError, Transport};
use crate::contract::{Failure, Message, Receipt};
use crate::domain::AttemptErrorType;
use crate::plugin::{PluginHost, PluginRef, ReuseScope};

/// A spec's top-level `url` (the field plugins conventionally send to), when it is a literal
/// URL none of the plugin's grants allows: `scheme://host:port`. A templated `url` is known
/// only at delivery, where a refused request names the grant instead.
fn ungranted_url(spec: &Value, grants: &crate::plugin::Grants) -> Option<String> {
    let text = spec.get("url")?.as_str()?;
    if text.contains("{{") {
        return None;
    }
    let url = url::Url::parse(text).ok()?;
    // The host as the outbound check reads it: a name, or an address without brackets.
    let host = super::url_host(&url)?;
    let port = url.port_or_known_default()?;
    (!grants.allows(url.scheme(), &host, port))
        .then(|| format!("{}://{}:{port}", url.scheme(), url.host_str().unwrap_or(&host)))
}

pub struct WasmTransport {
    pub host: PluginHost,
    pub plugin: PluginRef,
}

#[async_trait]
impl Transport for WasmTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        if !spec.is_object() {
            return Err(SpecError::new("spec", "must be an object"));
        }
        let plugin = self.host.get(&self.plugin).await.map_err(|e| SpecError::new("plugin", e.to_string()))?;
        if let Some(target) = ungranted_url(spec, plugin.egress.grants()) {
            return Err(SpecError::new(
                "url",
                format!(
                    "plugin '{}' is not granted {target}, so every delivery would be refused; reinstall it with `--allow-host {target}` (allow_host on POST /plugins)",
                    self.plugin
                ),
            ));
        }
        match self.host.runtime.validate(&plugin.loaded, &plugin.limits, spec.to_string()).await {
            Ok(Ok(())) => Ok(spec.clone()),
            Ok(Err(message)) => {
                Err(SpecError::new("spec", format!("plugin '{}' refused the spec: {message}", self.plugin)))
            }
            Err(message) => {
                Err(SpecError::new("spec", format!("plugin '{}' failed to validate the spec: {message}", self.plugin)))
            }
        }
    }

    /// The hosts the plugin is granted: it may send the spec's content to any of them.
    async fn destinations(&self, _spec: &Value) -> super::Destinations {
        match self.host.get(&self.plugin).await {
            Ok(plugin) => super::Destinations::Hosts(plugin.egress.grants().0.iter().map(|g| g.host.clone()).collect()),
            Err(_) => super::Destinations::Unknown,
        }
    }

    async fn deliver(&self, message: Message, delivery: &Delivery) -> Result<Receipt, Failure> {
        // A plugin that is not installed, or cannot load, fails the same way next time; a
        // database that did not answer may answer the next attempt.
        let plugin = self.host.get(&self.plugin).await.map_err(|e| match e.is_transient() {
            true => Failure::internal(true, e.to_string()),
            false => Failure::invalid_spec(e.to_string()),
        })?;
        let record = &plugin.record;
        delivery.push(
            "INFO",
            format!("Plugin {} version {} (sha256 {}).", record.name, record.version, &record.sha256[..12]),
        );
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        let timeout = Duration::from_millis(message.deadline_ms.saturating_sub(now_ms).max(1));
        // Only a plugin installed to reuse instances, and only within one endpoint version.
        let reuse = match &delivery.endpoint {
            Some(endpoint) if plugin.limits.reuses_instances() => {
                Some(ReuseScope { plugin: plugin.id, endpoint: endpoint.clone() })
            }
            _ => None,
        };
        let outcome = self
            .host
            .runtime
            .deliver(&plugin.loaded, &plugin.spare, &plugin.egress, &plugin.limits, message, timeout, reuse)
            .await;
        crate::metrics::plugin_call(&record.name, outcome.trapped, outcome.reused);
        for (level, line) in &outcome.logs.records {
            delivery.push(level, format!("[plugin {}] {line}", record.name));
        }
        if outcome.logs.suppressed > 0 {
            delivery.push(
                "WARN",
                format!(
                    "[plugin {}] {} more log records not kept (at most {} per call).",
                    record.name, outcome.logs.suppressed, plugin.limits.max_log_records
                ),
            );
        }
        if outcome.logs.output_not_kept > 0 {
            delivery.push(
                "WARN",
                format!(
                    "[plugin {}] {} more bytes of stdout/stderr not kept (at most {} KiB of each per call).",
                    record.name,
                    outcome.logs.output_not_kept,
                    crate::plugin::sandbox::OUTPUT_CAPTURE_BYTES / 1024
                ),
            );
        }
        for denial in &outcome.denials {
            delivery.push("WARN", format!("[plugin {}] outbound request denied: {denial}", record.name));
        }
        let mut result = outcome.result;
        // A request refused for want of a grant is refused again on every retry.
        if let (Err(failure), Some(target)) = (&mut result, outcome.ungranted.first()) {
            failure.retryable = false;
            failure.message = format!(
                "{}; plugin '{}' is not granted {target}: reinstall it with `--allow-host {target}` (allow_host on POST /plugins)",
                failure.message, record.name
            );
        }
        result
    }

    fn error_json(&self, failure: &Failure) -> Value {
        let mut error = error_json(failure, AttemptErrorType::PluginError, Some("code"));
        error["plugin"] = json!(self.plugin.name);
        error
    }
}
