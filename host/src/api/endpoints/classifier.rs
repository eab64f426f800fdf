//! An endpoint's `classifier`: the plugin that judges its receiver's answers (see
//! `worker::classify`), checked at registration — installed, of the classifier world, and
//! accepting the endpoint's `config`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::require_plugin;
use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::state::AppState;
use crate::plugin::{PluginRef, World};
use crate::store::Endpoint;

/// A classifier plugin judging the receiver's answers after each delivery.
#[derive(Debug, Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifierIn {
    /// An installed plugin of world `classifier-plugin`: `name` (its newest version at each
    /// attempt) or `name@3` (pinned to version 3).
    pub plugin: String,
    /// Passed to the classifier with each answer (an object; `{}` when not given). The plugin
    /// checks it at registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

impl ClassifierIn {
    /// The endpoint's classifier as the API shows it.
    pub fn of(endpoint: &Endpoint) -> Option<Self> {
        let plugin = endpoint.classifier_ref()?.to_string();
        Some(Self { plugin, config: Some(endpoint.classifier_config.clone().unwrap_or_else(|| serde_json::json!({}))) })
    }
}

/// Check `classifier`: the plugin it names, and that the plugin accepts its config.
pub(super) async fn check(state: &AppState, classifier: &ClassifierIn) -> ApiResult<(PluginRef, Option<Value>)> {
    let plugin = PluginRef::parse(&classifier.plugin).map_err(|e| ApiError::invalid_field("classifier.plugin", e))?;
    if let Some(config) = &classifier.config {
        if !config.is_object() {
            return Err(ApiError::invalid_field("classifier.config", "must be an object"));
        }
    }
    require_plugin(state, "classifier.plugin", &plugin, World::Classifier).await?;
    let ready = state.plugins.get(&plugin).await.map_err(|e| match e.is_transient() {
        true => ApiError::internal(&e),
        false => ApiError::new(ErrorCode::InvalidPluginRef, format!("`classifier.plugin`: {e}")),
    })?;
    let config_json = classifier.config.as_ref().map_or_else(|| "{}".to_owned(), Value::to_string);
    match state.plugins.runtime.check_classifier_config(&ready.loaded, &ready.limits, config_json).await {
        Ok(Ok(())) => Ok((plugin, classifier.config.clone())),
        Ok(Err(message)) => Err(ApiError::invalid_field(
            "classifier.config",
            format!("classifier '{plugin}' refused it: {}", message.chars().take(1024).collect::<String>()),
        )),
        Err(error) => Err(ApiError::invalid_field(
            "classifier.config",
            format!("classifier '{plugin}' could not check it: {error}"),
        )),
    }
}
