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
        if let Some(reference) = secret_reference(template) {
            return Err(TemplateError {
                field: "spec".into(),
                message: format!(
                    "`{{{{{reference}}}}}` cannot resolve: renderer plugins are never given secrets (renderer '{}'); drop `renderer` to use the built-in one, or pass the value through a config",
                    self.plugin
                ),
            });
        }
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

/// The first `{{secret…}}` expression in a template's strings or keys, if any: a renderer plugin
/// renders with an empty `secret`, so such a template would fail at every delivery.
fn secret_reference(template: &Value) -> Option<String> {
    fn in_text(text: &str) -> Option<String> {
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let end = after.find("}}").unwrap_or(after.len());
            let expression = after[..end].trim();
            if expression == "secret" || expression.starts_with("secret.") || expression.starts_with("secret[") {
                return Some(expression.to_owned());
            }
            rest = &after[end..];
        }
        None
    }
    match template {
        Value::String(text) => in_text(text),
        Value::Array(items) => items.iter().find_map(secret_reference),
        Value::Object(map) => map.iter().find_map(|(key, value)| in_text(key).or_else(|| secret_reference(value))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn secret_references_are_found_anywhere_in_a_template() {
        let found = |t| super::secret_reference(&t);
        assert_eq!(
            found(json!({"h": {"Authorization": "Bearer {{ secret.token }}"}})).as_deref(),
            Some("secret.token")
        );
        assert_eq!(found(json!(["x", {"{{secret.k}}": 1}])).as_deref(), Some("secret.k"));
        assert_eq!(found(json!({"a": "{{input.secret}}", "b": "{{config.secret_name}}", "c": "secret.x"})), None);
    }
}
