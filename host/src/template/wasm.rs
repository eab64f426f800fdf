//! A renderer plugin behind the [`Renderer`] trait, used in place of the built-in renderer by
//! an endpoint that names one.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{RenderContext, Renderer, TemplateError, TemplateKey, TemplateRefs};
use crate::contract::RenderError;
use crate::plugin::PluginHost;

/// A renderer plugin. It renders `input` and `config`; secrets are not passed to renderer
/// plugins (the host cannot know which a foreign template syntax names).
pub struct WasmRenderer {
    pub host: PluginHost,
    pub plugin: String,
}

#[async_trait]
impl Renderer for WasmRenderer {
    async fn check(&self, _root: &str, template: &Value) -> Result<TemplateRefs, TemplateError> {
        let error = |e: crate::plugin::PluginError| TemplateError { field: "renderer".into(), message: e.to_string() };
        let plugin = self.host.latest(&self.plugin).await.map_err(error)?;
        self.host.runtime.render(&plugin.loaded, &plugin.limits, template.to_string(), None).await.map_err(|e| {
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
        let plugin = self.host.latest(&self.plugin).await.map_err(|e| RenderError::new(e.to_string(), None))?;
        let context = json!({ "input": context.input, "config": context.config, "secret": {} });
        let rendered = self
            .host
            .runtime
            .render(&plugin.loaded, &plugin.limits, template.to_string(), Some(context.to_string()))
            .await?;
        serde_json::from_str(&rendered)
            .map_err(|e| RenderError::new(format!("renderer '{}' returned invalid JSON: {e}", self.plugin), None))
    }
}
