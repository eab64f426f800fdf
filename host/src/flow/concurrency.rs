//! Concurrency keys: at most `max_in_flight` executions of one key of an endpoint in flight
//! across every worker, and with `ordering: fifo`, one key's executions delivered one at a
//! time in the order their jobs fire.
//!
//! An endpoint's `concurrency.key` is a template of the job's input (`{{input.customer_id}}`,
//! `org-{{input.org}}/{{input.user}}`), rendered once when an execution is made and kept on
//! it (`executions.concurrency_key`), with the endpoint's `max_in_flight`. Such an execution is
//! made PENDING and becomes QUEUED only when its key admits it (`store::Keys`): a key's
//! QUEUED, RUNNING and RETRYING executions are its executions in flight, and the oldest
//! waiting ones (by `run_at`, then id) are admitted as those finish. Nothing is kept for a
//! key but its executions: a key with none waiting or in flight costs nothing.
//!
//! Why not a check in the claim: a claim of many workers at once would each see the key free
//! and take one each; the admission takes a lock per key (PostgreSQL: an advisory lock of the
//! transaction) and is made where a key's state changes — when its executions are made, when
//! one finishes (`worker`), when a waiting one's time comes and as a sweep (`scheduler::promoter`).
//!
//! Ordering: with `fifo`, an execution that will retry stays RETRYING and keeps its key, so
//! the ones behind it wait through its backoff; when it finally fails (or is cancelled) the
//! next one is admitted. Without it, an execution that will retry goes back to PENDING at its
//! retry time and waits its turn with the others, so a failing one does not hold its key.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest a rendered key may be, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The largest `max_in_flight`.
pub const MAX_IN_FLIGHT: u32 = 10_000;
/// The longest key template, in bytes.
const MAX_TEMPLATE_BYTES: usize = 512;

/// How one key's executions are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KeyOrdering {
    /// At most `max_in_flight` at once, in no promised order; a retrying execution gives its
    /// place up while it waits.
    #[default]
    Unordered,
    /// One at a time, in the order their jobs fire; a retrying execution holds its key.
    Fifo,
}

/// An endpoint's concurrency key, as stored (`endpoints.concurrency`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Concurrency {
    /// The key's template, checked ([`KeyTemplate::parse`]).
    pub key: String,
    pub max_in_flight: u32,
    #[serde(default)]
    pub ordering: KeyOrdering,
}

impl Concurrency {
    /// Checked: the template's form, `max_in_flight` within 1 and [`MAX_IN_FLIGHT`] (1
    /// under `fifo`). The error names the field.
    pub fn new(key: String, max_in_flight: Option<u32>, ordering: KeyOrdering) -> Result<Self, (String, String)> {
        KeyTemplate::parse(&key).map_err(|why| ("concurrency.key".to_owned(), why))?;
        let max_in_flight = match (ordering, max_in_flight) {
            (KeyOrdering::Fifo, None | Some(1)) => 1,
            (KeyOrdering::Fifo, Some(n)) => {
                return Err((
                    "concurrency.max_in_flight".into(),
                    format!("must be 1 with `ordering: fifo` (one at a time, in order), got {n}"),
                ))
            }
            (KeyOrdering::Unordered, None) => {
                return Err(("concurrency.max_in_flight".into(), "is required (or set `ordering: fifo`)".into()))
            }
            (KeyOrdering::Unordered, Some(n @ 1..=MAX_IN_FLIGHT)) => n,
            (KeyOrdering::Unordered, Some(n)) => {
                return Err((
                    "concurrency.max_in_flight".into(),
                    format!("must be between 1 and {MAX_IN_FLIGHT}, got {n}"),
                ))
            }
        };
        Ok(Self { key, max_in_flight, ordering })
    }

    /// The key of an execution with `input`: the template rendered; an error naming the
    /// input's field when it is missing or not a string, number or boolean.
    pub fn key_of(&self, input: &Value) -> Result<String, KeyError> {
        KeyTemplate::parse(&self.key).map_err(|why| KeyError { field: "concurrency.key".into(), why })?.render(input)
    }

    /// `max_in_flight` as the executions keep it.
    pub fn limit(&self) -> i32 {
        i32::try_from(self.max_in_flight).unwrap_or(i32::MAX)
    }
}

/// Why a key could not be rendered: `field` is the input's (`input.customer_id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub field: String,
    pub why: String,
}

/// A parsed key template: literal text and `{{input.a.b}}` paths, nothing else (a key is kept
/// and shown on every execution: no secrets, no config, no filters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Input(String),
}

impl KeyTemplate {
    pub fn parse(template: &str) -> Result<Self, String> {
        if template.len() > MAX_TEMPLATE_BYTES {
            return Err(format!("is {} bytes; at most {MAX_TEMPLATE_BYTES}", template.len()));
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| "has a `{{` without its `}}`".to_owned())?;
            let inner = after[..close].trim();
            let path = inner.strip_prefix("input.").filter(|p| !p.is_empty()).ok_or_else(|| {
                format!("`{{{{{inner}}}}}`: a key may use only the job's input, as `{{{{input.field}}}}`")
            })?;
            if !path.split('.').all(|k| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-'))
            {
                return Err(format!("`{{{{{inner}}}}}`: a path of field names separated by dots, nothing else"));
            }
            parts.push(Part::Input(path.to_owned()));
            rest = &after[close + 2..];
        }
        if rest.contains("}}") {
            return Err("has a `}}` without its `{{`".into());
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        if !parts.iter().any(|p| matches!(p, Part::Input(_))) {
            return Err("names no `{{input.…}}` field: every execution would share one key".into());
        }
        Ok(Self { parts })
    }

    pub fn render(&self, input: &Value) -> Result<String, KeyError> {
        let mut key = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => key.push_str(text),
                Part::Input(path) => {
                    let field = format!("input.{path}");
                    match crate::template::lookup_path(input, path) {
                        Some(Value::String(s)) => key.push_str(s),
                        Some(v @ (Value::Number(_) | Value::Bool(_))) => key.push_str(&v.to_string()),
                        Some(_) => {
                            return Err(KeyError {
                                field,
                                why: "is the endpoint's concurrency key: it must be a string, number or boolean".into(),
                            })
                        }
                        None => {
                            return Err(KeyError {
                                field,
                                why: "is required: the endpoint's concurrency key is made of it".into(),
                            })
                        }
                    }
                }
            }
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(KeyError {
                field: "input".into(),
                why: format!("makes a concurrency key of {} bytes; at most {MAX_KEY_BYTES}", key.len()),
            });
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_is_rendered_from_the_input_alone() {
        let t = KeyTemplate::parse("org-{{ input.org }}/{{input.user.id}}").unwrap();
        assert_eq!(t.render(&json!({"org": "acme", "user": {"id": 7}})).unwrap(), "org-acme/7");
        assert_eq!(t.render(&json!({"org": true, "user": {"id": "x"}})).unwrap(), "org-true/x");
        let missing = t.render(&json!({"org": "acme"})).unwrap_err();
        assert_eq!(missing.field, "input.user.id");
        let object = t.render(&json!({"org": {"a": 1}, "user": {"id": 1}})).unwrap_err();
        assert_eq!(object.field, "input.org");
        let long = t.render(&json!({"org": "a".repeat(300), "user": {"id": 1}})).unwrap_err();
        assert!(long.why.contains("at most 256"), "{long:?}");
    }

    #[test]
    fn a_template_names_input_fields_and_nothing_else() {
        for (bad, says) in [
            ("{{secret.token}}", "only the job's input"),
            ("{{config.a}}", "only the job's input"),
            ("{{input.a | upper}}", "nothing else"),
            ("{{input.}}", "only the job's input"),
            ("{{input.a", "without its `}}`"),
            ("a}}", "without its `{{`"),
            ("fixed", "names no"),
            ("", "names no"),
        ] {
            let why = KeyTemplate::parse(bad).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
        assert!(KeyTemplate::parse(&format!("{{{{input.a}}}}{}", "x".repeat(600))).is_err());
    }

    #[test]
    fn fifo_is_one_at_a_time_and_unordered_needs_its_bound() {
        let fifo = Concurrency::new("{{input.k}}".into(), None, KeyOrdering::Fifo).unwrap();
        assert_eq!(fifo.max_in_flight, 1);
        let (field, why) = Concurrency::new("{{input.k}}".into(), Some(2), KeyOrdering::Fifo).unwrap_err();
        assert_eq!(field, "concurrency.max_in_flight");
        assert!(why.contains("must be 1"), "{why}");
        let (field, _) = Concurrency::new("{{input.k}}".into(), None, KeyOrdering::Unordered).unwrap_err();
        assert_eq!(field, "concurrency.max_in_flight");
        let (field, _) = Concurrency::new("{{input.k}}".into(), Some(0), KeyOrdering::Unordered).unwrap_err();
        assert_eq!(field, "concurrency.max_in_flight");
        let (field, _) = Concurrency::new("{{secret.k}}".into(), Some(3), KeyOrdering::Unordered).unwrap_err();
        assert_eq!(field, "concurrency.key");
        let stored: Concurrency = serde_json::from_value(json!({"key": "{{input.k}}", "max_in_flight": 3})).unwrap();
        assert_eq!(stored.ordering, KeyOrdering::Unordered);
        assert_eq!(stored.key_of(&json!({"k": "a"})).unwrap(), "a");
    }
}
