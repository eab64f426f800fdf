//! Templates in endpoint specs: `{{input.*}}`, `{{config.*}}`, `{{secret.*}}`, rendered by
//! minijinja with strict undefined behaviour.
//!
//! - [`check_spec`]: at registration, every templated string must parse, may only use the three
//!   namespaces, and must name its config keys and secrets with literal dotted paths, so the
//!   service can check them before the first fire rather than at 3 a.m.
//! - [`render`]: the [`Renderer`] trait and the built-in minijinja renderer.

pub mod bounded;
mod direct;
pub mod render;
pub mod renderers;
pub mod wasm;

use std::collections::BTreeSet;

pub use render::{percent_encode, redact, CompiledTemplate, MinijinjaRenderer, RenderContext, Renderer, TemplateKey};
pub use renderers::Renderers;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

/// What a spec's templates refer to, gathered at registration.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TemplateRefs {
    /// Secret names (`{{secret.NAME}}`).
    pub secrets: BTreeSet<String>,
    /// Dotted paths into the endpoint's config (`{{config.a.b}}` gives `a.b`).
    pub config_paths: BTreeSet<String>,
}

/// A template that cannot be used, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// JSON path of the offending string, e.g. `spec.headers.Authorization`.
    pub field: String,
    pub message: String,
}

/// Steps (minijinja instructions) one templated string may take to render: plenty for a
/// loop over a few thousand input items, and a bound on one that nests loops over a large
/// input. A render that runs out fails its execution at once (a retry would too).
pub const RENDER_FUEL: u64 = 100_000;

/// Bytes a whole spec may render to, all its strings together.
pub const RENDER_MAX_BYTES: usize = 1024 * 1024;

/// The environment every template of the service is compiled in: strict, so an undefined
/// variable is an error instead of an empty string, and with a budget of [`RENDER_FUEL`]
/// steps per templated string.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(RENDER_FUEL));
    env
}

/// Whether a string holds template syntax at all (plain strings are taken literally).
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Whether a string may be rendered before delivery, by the built-in renderer or by a renderer
/// plugin (`${…}`, as plugins/dollar-renderer uses): such a string is checked after rendering,
/// not at registration.
pub fn may_be_template(s: &str) -> bool {
    is_template(s) || s.contains("${")
}

/// Parse every templated string in `spec` (object values, arrays, nested), check the
/// namespaces it uses, and gather what it refers to. `root` names the spec in error paths.
pub fn check_spec(root: &str, spec: &Value) -> Result<TemplateRefs, TemplateError> {
    let env = environment();
    let mut refs = TemplateRefs::default();
    check_value(&env, root.to_owned(), spec, &mut refs)?;
    Ok(refs)
}

fn check_value(
    env: &Environment<'_>,
    field: String,
    value: &Value,
    refs: &mut TemplateRefs,
) -> Result<(), TemplateError> {
    match value {
        Value::String(s) => check_string(env, &field, s, refs),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_value(env, format!("{field}[{i}]"), item, refs)?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                if is_template(key) {
                    return Err(TemplateError {
                        field: format!("{field}.{key}"),
                        message: "object keys are taken literally; templates belong in values".into(),
                    });
                }
                check_value(env, format!("{field}.{key}"), item, refs)?;
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

fn check_string(
    env: &Environment<'_>,
    field: &str,
    source: &str,
    refs: &mut TemplateRefs,
) -> Result<(), TemplateError> {
    if !is_template(source) {
        return Ok(());
    }
    let error = |message: String| TemplateError { field: field.to_owned(), message };
    let template = env.template_from_str(source).map_err(|e| error(syntax_message(&e)))?;
    for variable in template.undeclared_variables(true) {
        let (namespace, path) = variable.split_once('.').unwrap_or((variable.as_str(), ""));
        match (namespace, path) {
            ("input", _) => {}
            ("config", "") | ("secret", "") => {
                return Err(error(format!(
                    "name the {namespace} key with a literal dotted path, as in {{{{{namespace}.NAME}}}}, so it can be checked at registration"
                )))
            }
            ("config", path) => {
                refs.config_paths.insert(path.to_owned());
            }
            ("secret", path) => {
                if path.contains('.') {
                    return Err(error(format!("a secret is a string; `secret.{path}` reaches inside it")));
                }
                refs.secrets.insert(path.to_owned());
            }
            (other, _) => {
                return Err(error(format!(
                    "unknown variable `{other}`: templates can read input.*, config.* and secret.*"
                )))
            }
        }
    }
    Ok(())
}

/// minijinja's message without the template source it sometimes appends: the source may hold
/// a secret-looking literal and the caller already knows which field it sent.
fn syntax_message(error: &minijinja::Error) -> String {
    let mut message = format!("template syntax error: {}", error.detail().unwrap_or("invalid template"));
    if let Some(line) = error.line() {
        message.push_str(&format!(" (line {line})"));
    }
    message
}

/// Look up a dotted path (`a.b.c`) in a JSON object.
pub fn lookup_path<'v>(root: &'v Value, path: &str) -> Option<&'v Value> {
    lookup_keys(root, path.split('.'))
}

/// Look up a path already split into its keys (none: `root` itself).
fn lookup_keys<'v, 'k>(root: &'v Value, keys: impl IntoIterator<Item = &'k str>) -> Option<&'v Value> {
    keys.into_iter().try_fold(root, |node, key| node.as_object()?.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gathers_secret_and_config_references_from_nested_values() {
        let spec = json!({
            "url": "{{config.api_base_url}}/emails",
            "headers": {"Authorization": "Bearer {{secret.email_api_key}}"},
            "body_template": {"user": {"id": "{{input.user.id}}"}, "list": ["{{config.nested.key}}", 3]}
        });
        let refs = check_spec("spec", &spec).unwrap();
        assert_eq!(refs.secrets, BTreeSet::from(["email_api_key".to_owned()]));
        assert_eq!(refs.config_paths, BTreeSet::from(["api_base_url".to_owned(), "nested.key".to_owned()]));
    }

    #[test]
    fn syntax_error_names_the_field() {
        let err = check_spec("spec", &json!({"headers": {"X": "{{input.a"}})).unwrap_err();
        assert_eq!(err.field, "spec.headers.X");
        assert!(err.message.contains("syntax"), "{}", err.message);
    }

    #[test]
    fn unknown_namespace_and_dynamic_lookups_are_refused() {
        let err = check_spec("spec", &json!({"url": "{{ env.HOME }}"})).unwrap_err();
        assert!(err.message.contains("unknown variable `env`"), "{}", err.message);
        let err = check_spec("spec", &json!({"url": "{{ secret[input.which] }}"})).unwrap_err();
        assert!(err.message.contains("literal dotted path"), "{}", err.message);
        let err = check_spec("spec", &json!({"k": [1, "{{ secret.a.b }}"]})).unwrap_err();
        assert_eq!(err.field, "spec.k[1]");
    }

    #[test]
    fn plain_strings_are_not_parsed() {
        assert_eq!(check_spec("spec", &json!({"url": "https://x/{not a template}"})).unwrap(), TemplateRefs::default());
    }

    #[test]
    fn lookup_path_walks_objects() {
        let v = json!({"a": {"b": 1}});
        assert_eq!(lookup_path(&v, "a.b"), Some(&json!(1)));
        assert_eq!(lookup_path(&v, "a.c"), None);
    }
}
