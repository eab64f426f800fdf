//! Plugins behind the service's own traits: a transport plugin is a [`Transport`], a renderer
//! plugin a [`Renderer`]. Each call looks up the plugin's newest version, so installing a new
//! version applies from the next attempt; the version that ran is logged with the attempt.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::grants::Grants;
use super::limits::PluginLimits;
use super::runtime::{Loaded, PluginRuntime};
use crate::contract::{Failure, Message, Receipt, RenderError};
use crate::store::{PluginRecord, Store};
use crate::template::{RenderContext, Renderer, TemplateError, TemplateKey, TemplateRefs};
use crate::transport::{error_json, DeliveryLog, SpecError, Transport};

/// What plugin calls need: the runtime and the store the plugins are kept in.
#[derive(Clone)]
pub struct PluginHost {
    pub runtime: Arc<PluginRuntime>,
    pub store: Arc<dyn Store>,
}

impl PluginHost {
    /// The newest version of `name`, ready to call.
    pub async fn latest(&self, name: &str) -> Result<(PluginRecord, Arc<Loaded>), String> {
        let record = self
            .store
            .plugin_latest(name)
            .await
            .map_err(|e| format!("cannot read plugin '{name}': {e}"))?
            .ok_or_else(|| format!("plugin '{name}' is not installed"))?;
        let bytes = match self.runtime.load(&record.sha256, || None) {
            Ok(loaded) => return Ok((record, loaded)),
            Err(_) => self.store.plugin_bytes(&record.name, record.version).await.map_err(|e| e.to_string())?,
        };
        let loaded = self.runtime.load(&record.sha256, || bytes)?;
        Ok((record, loaded))
    }
}

pub struct WasmTransport {
    pub host: PluginHost,
    pub plugin: String,
}

fn limits_of(record: &PluginRecord) -> PluginLimits {
    serde_json::from_value(record.limits.clone()).unwrap_or_default()
}

/// The grants as installed (checked then, so a pattern that no longer parses grants nothing).
fn grants_of(record: &PluginRecord) -> Grants {
    let texts: Vec<String> = serde_json::from_value(record.grants.clone()).unwrap_or_default();
    Grants::parse(&texts).unwrap_or_default()
}

#[async_trait]
impl Transport for WasmTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        if !spec.is_object() {
            return Err(SpecError::new("spec", "must be an object"));
        }
        let (record, loaded) = self.host.latest(&self.plugin).await.map_err(|e| SpecError::new("plugin", e))?;
        match self.host.runtime.validate(&loaded, &limits_of(&record), spec.to_string()).await {
            Ok(Ok(())) => Ok(spec.clone()),
            Ok(Err(message)) => {
                Err(SpecError::new("spec", format!("plugin '{}' refused the spec: {message}", self.plugin)))
            }
            Err(message) => {
                Err(SpecError::new("spec", format!("plugin '{}' failed to validate the spec: {message}", self.plugin)))
            }
        }
    }

    async fn deliver(&self, message: Message, log: &DeliveryLog) -> Result<Receipt, Failure> {
        let (record, loaded) = self.host.latest(&self.plugin).await.map_err(Failure::invalid_spec)?;
        log.push(
            "INFO",
            format!("Plugin {} version {} (sha256 {}).", record.name, record.version, &record.sha256[..12]),
        );
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        let timeout = Duration::from_millis(message.deadline_ms.saturating_sub(now_ms).max(1));
        let outcome = self
            .host
            .runtime
            .deliver(&loaded, Arc::new(grants_of(&record)), &limits_of(&record), message, timeout)
            .await;
        for (level, line) in &outcome.logs.records {
            log.push(level, format!("[plugin {}] {line}", record.name));
        }
        if outcome.logs.suppressed > 0 {
            log.push(
                "WARN",
                format!(
                    "[plugin {}] {} more log records suppressed (rate limit).",
                    record.name, outcome.logs.suppressed
                ),
            );
        }
        for denial in &outcome.denials {
            log.push("WARN", format!("[plugin {}] outbound request denied: {denial}", record.name));
        }
        outcome.result
    }

    fn error_json(&self, failure: &Failure) -> Value {
        let mut error = error_json(failure, "PLUGIN_ERROR", Some("code"));
        error["plugin"] = json!(self.plugin);
        error
    }
}

/// A renderer plugin. It renders `input` and `config`; secrets are not passed to renderer
/// plugins (the host cannot know which a foreign template syntax names).
pub struct WasmRenderer {
    pub host: PluginHost,
    pub plugin: String,
}

#[async_trait]
impl Renderer for WasmRenderer {
    async fn check(&self, _root: &str, template: &Value) -> Result<TemplateRefs, TemplateError> {
        let error = |message: String| TemplateError { field: "renderer".into(), message };
        let (record, loaded) = self.host.latest(&self.plugin).await.map_err(error)?;
        self.host.runtime.render(&loaded, &limits_of(&record), template.to_string(), None).await.map_err(|e| {
            TemplateError { field: "spec".into(), message: format!("renderer '{}': {}", self.plugin, e.message) }
        })?;
        Ok(TemplateRefs::default())
    }

    async fn render(
        &self,
        _key: &TemplateKey,
        template: &Value,
        context: &RenderContext,
    ) -> Result<Value, RenderError> {
        let (record, loaded) = self.host.latest(&self.plugin).await.map_err(|e| RenderError::new(e, None))?;
        let context = json!({ "input": context.input, "config": context.config, "secret": {} });
        let rendered = self
            .host
            .runtime
            .render(&loaded, &limits_of(&record), template.to_string(), Some(context.to_string()))
            .await?;
        serde_json::from_str(&rendered)
            .map_err(|e| RenderError::new(format!("renderer '{}' returned invalid JSON: {e}", self.plugin), None))
    }
}
