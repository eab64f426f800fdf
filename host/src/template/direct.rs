//! Templated strings that only read variables, rendered without minijinja.
//!
//! Most specs' templates are plain lookups: `"{{input.order_id}}"`, `"{{config.base_url}}/hooks"`,
//! `"Bearer {{secret.api_key}}"`. Rendering those through minijinja costs a context built from
//! the whole input, a VM run and, for a whole expression, a JSON round trip through text; in a
//! PostgreSQL drain profile (side-by-side, 80,000 deliveries) that was 5% of the worker's CPU
//! for a spec of two such strings. A [`Direct`] string is literal text and dotted variable
//! paths, resolved against the JSON of the render context as it is.
//!
//! It gives exactly what minijinja gives, or declines: when a path does not resolve, or a value
//! is one minijinja would print in its own way (a float, a bool, null inside text), the caller
//! renders the string with minijinja as before, which also words the error. A test renders a
//! table of templates both ways and compares them.

use serde_json::Value;

use super::lookup_keys;
use super::render::{percent_encode, percent_encode_strings, RenderContext};

/// A templated string made only of literal text and `{{ namespace.key.key }}` lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Direct {
    /// Literal text and lookups in order; a string that is one lookup alone keeps its JSON type.
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Lookup(Path),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Path {
    namespace: Namespace,
    keys: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Input,
    Config,
    Secret,
}

/// A value found by a lookup: a part of the context's JSON, or a secret's text.
enum Found<'c> {
    Json(&'c Value),
    Secret(&'c str),
}

impl Direct {
    /// `source` as literal text and lookups, if that is all it is. Anything else — filters,
    /// operators, blocks, comments, whitespace control, line breaks (minijinja drops a final
    /// one) — is left to minijinja.
    pub(super) fn parse(source: &str) -> Option<Self> {
        if source.contains("{%") || source.contains("{#") || source.contains(['\n', '\r']) {
            return None;
        }
        let mut parts = Vec::new();
        let mut rest = source;
        while let Some(start) = rest.find("{{") {
            if start > 0 {
                parts.push(Part::Text(rest[..start].to_owned()));
            }
            let after = &rest[start + 2..];
            let end = after.find("}}")?;
            parts.push(Part::Lookup(Path::parse(after[..end].trim())?));
            rest = &after[end + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Some(Self { parts })
    }

    /// The rendered value, or None to render with minijinja instead. `url` says the string is
    /// a URL field: input strings are percent-encoded into it, as minijinja's URL context does.
    /// The returned length is what the render's byte budget is charged (the JSON text of a
    /// whole lookup, as `te_json` writes it; the text otherwise).
    pub(super) fn render(&self, context: &RenderContext, url: bool) -> Option<(Value, usize)> {
        if let [Part::Lookup(path)] = self.parts.as_slice() {
            let value = match path.find(context)? {
                Found::Secret(text) => Value::String(text.to_owned()),
                Found::Json(value) if url && path.namespace == Namespace::Input => percent_encode_strings(value),
                Found::Json(value) => value.clone(),
            };
            let length = json_length(&value);
            return Some((value, length));
        }
        let mut text = String::new();
        for part in &self.parts {
            match part {
                Part::Text(literal) => text.push_str(literal),
                Part::Lookup(path) => match path.find(context)? {
                    Found::Secret(secret) => text.push_str(secret),
                    Found::Json(Value::String(s)) if url && path.namespace == Namespace::Input => {
                        text.push_str(&percent_encode(s))
                    }
                    Found::Json(Value::String(s)) => text.push_str(s),
                    // Integers print the same either way; minijinja has its own way with floats,
                    // bools, null, arrays and objects.
                    Found::Json(Value::Number(n)) if !n.is_f64() => text.push_str(&n.to_string()),
                    Found::Json(_) => return None,
                },
            }
        }
        let length = text.len();
        Some((Value::String(text), length))
    }
}

impl Path {
    fn parse(expression: &str) -> Option<Self> {
        let mut names = expression.split('.');
        let namespace = match names.next()? {
            "input" => Namespace::Input,
            "config" => Namespace::Config,
            "secret" => Namespace::Secret,
            _ => return None,
        };
        let keys: Vec<String> = names.map(|key| is_plain_name(key).then(|| key.to_owned())).collect::<Option<_>>()?;
        // `{{config}}` and `{{secret}}` are refused at registration, and a secret is a string.
        let fits = match namespace {
            Namespace::Input => true,
            Namespace::Config => !keys.is_empty(),
            Namespace::Secret => keys.len() == 1,
        };
        fits.then_some(Self { namespace, keys })
    }

    fn find<'c>(&self, context: &'c RenderContext) -> Option<Found<'c>> {
        let root = match self.namespace {
            Namespace::Input => &context.input,
            Namespace::Config => &context.config,
            Namespace::Secret => return context.secrets.get(&self.keys[0]).map(|s| Found::Secret(s.expose())),
        };
        lookup_keys(root, self.keys.iter().map(String::as_str)).map(Found::Json)
    }
}

/// An ASCII identifier that is not one of minijinja's words (`true`, `none`, `and`, …).
fn is_plain_name(name: &str) -> bool {
    const WORDS: [&str; 16] = [
        "true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else", "self", "loop",
        "super",
    ];
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !WORDS.contains(&name)
}

/// The length of `value`'s compact JSON text, without writing it anywhere.
fn json_length(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a Value to a writer that cannot fail does not fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_text_and_lookups_are_direct() {
        for direct in [
            "{{input.a}}",
            "{{ input.a.b_2 }}",
            "{{input}}",
            "Bearer {{secret.key}}",
            "{{config.base}}/x/{{input.id}}?q={{ input.q }}",
            "a }} b {{input.a}}",
        ] {
            assert!(Direct::parse(direct).is_some(), "{direct}");
        }
        for other in [
            "{{ input.a | upper }}",
            "{{ input.a ~ 'x' }}",
            "{{ input['a'] }}",
            "{{ input.0 }}",
            "{{ input.true }}",
            "{{- input.a }}",
            "{{ config }}",
            "{{ secret }}",
            "{{ secret.a.b }}",
            "{{ env.HOME }}",
            "{% if input.a %}x{% endif %}",
            "{# note #}{{input.a}}",
            "{{input.a}}\n",
            "{{ input.a ",
            "{{{input.a}}}",
        ] {
            assert!(Direct::parse(other).is_none(), "{other}");
        }
    }

    #[test]
    fn lookups_render_without_minijinja_or_decline() {
        let context = RenderContext {
            input: serde_json::json!({"id": "a/b", "n": 7, "x": 1.5, "o": {"k": [1]}}),
            config: serde_json::json!({"base": "https://h.test"}),
            secrets: [("key".to_owned(), crate::secret::SecretValue::new("s3cr3t".to_owned()))].into(),
        };
        let render = |source: &str, url: bool| Direct::parse(source).unwrap().render(&context, url);
        assert_eq!(render("{{input.o}}", false), Some((serde_json::json!({"k": [1]}), 9)));
        assert_eq!(render("{{input.id}}", true), Some((serde_json::json!("a%2Fb"), 7)));
        assert_eq!(render("{{config.base}}/{{input.id}}?n={{input.n}}", true).unwrap().0, "https://h.test/a%2Fb?n=7");
        assert_eq!(render("Bearer {{secret.key}}", false).unwrap().0, "Bearer s3cr3t");
        // minijinja's to word: a float in text, a missing key, a missing secret.
        assert_eq!(render("x{{input.x}}", false), None);
        assert_eq!(render("{{input.missing}}", false), None);
        assert_eq!(render("{{secret.other}}", false), None);
    }
}
