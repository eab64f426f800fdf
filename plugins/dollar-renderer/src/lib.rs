//! `dollar-renderer`: renders `${input.user.id}`-style placeholders, for endpoints whose
//! payloads already use `{{ }}` for something else. A string that is exactly one placeholder
//! keeps the JSON type of its value; a missing value is an error naming it.

use taskexec_plugin_sdk::renderer::{export, RenderError, Renderer};
use serde_json::Value;

struct DollarRenderer;

fn error(message: String, variable: Option<String>) -> RenderError {
    RenderError { message, variable }
}

/// The placeholders of a string: (start, end, path).
fn placeholders(s: &str) -> Result<Vec<(usize, usize, &str)>, RenderError> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(start) = s[from..].find("${").map(|i| i + from) {
        let end = s[start..]
            .find('}')
            .map(|i| i + start)
            .ok_or_else(|| error(format!("unclosed placeholder in `{s}`"), None))?;
        let path = s[start + 2..end].trim();
        let namespace = path.split('.').next().unwrap_or_default();
        if !["input", "config", "secret"].contains(&namespace) || path.split('.').count() < 2 {
            return Err(error(format!("`{path}`: placeholders read input.*, config.* or secret.*"), None));
        }
        found.push((start, end + 1, path));
        from = end + 1;
    }
    Ok(found)
}

fn lookup<'a>(context: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(context, |node, key| node.get(key))
}

fn render(template: &Value, context: &Value) -> Result<Value, RenderError> {
    Ok(match template {
        Value::String(s) => {
            let found = placeholders(s)?;
            if found.len() == 1 && found[0].0 == 0 && found[0].1 == s.len() {
                let path = found[0].2;
                return lookup(context, path)
                    .cloned()
                    .ok_or_else(|| error(format!("`{path}` is not defined"), Some(path.into())));
            }
            let mut out = String::new();
            let mut at = 0;
            for (start, end, path) in found {
                out.push_str(&s[at..start]);
                match lookup(context, path) {
                    Some(Value::String(v)) => out.push_str(v),
                    Some(v) => out.push_str(&v.to_string()),
                    None => return Err(error(format!("`{path}` is not defined"), Some(path.into()))),
                }
                at = end;
            }
            out.push_str(&s[at..]);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| render(i, context)).collect::<Result<_, _>>()?),
        Value::Object(map) => Value::Object(
            map.iter().map(|(k, v)| Ok((k.clone(), render(v, context)?))).collect::<Result<_, RenderError>>()?,
        ),
        other => other.clone(),
    })
}

fn check(template: &Value) -> Result<(), RenderError> {
    match template {
        Value::String(s) => placeholders(s).map(|_| ()),
        Value::Array(items) => items.iter().try_for_each(check),
        Value::Object(map) => map.values().try_for_each(check),
        _ => Ok(()),
    }
}

impl Renderer for DollarRenderer {
    fn check(template_json: String) -> Result<(), RenderError> {
        let template: Value = serde_json::from_str(&template_json).map_err(|e| error(e.to_string(), None))?;
        check(&template)
    }

    fn render(template_json: String, context_json: String) -> Result<String, RenderError> {
        let template: Value = serde_json::from_str(&template_json).map_err(|e| error(e.to_string(), None))?;
        let context: Value = serde_json::from_str(&context_json).map_err(|e| error(e.to_string(), None))?;
        Ok(render(&template, &context)?.to_string())
    }
}

export!(DollarRenderer);
