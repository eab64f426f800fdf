//! The built-in renderer: minijinja, strict.
//!
//! An endpoint spec is compiled once per (endpoint, version) into a [`CompiledTemplate`]: every
//! templated string becomes a template in one private minijinja environment, and the JSON tree
//! around them is kept as it is. Rendering walks the tree:
//! - a string that is exactly one expression (`"{{input.amount}}"`) keeps the JSON type of its
//!   value: it is compiled as `{{ (EXPR) | te_json }}` and the output parsed back as JSON
//!   (`te_json` is minijinja's `tojson` made strict: `tojson` turns an undefined value into
//!   `null`, which would deliver a null where the user's data is missing);
//! - any other templated string renders to a string;
//! - a string that only reads variables (`"{{input.id}}"`, `"Bearer {{secret.key}}"`) is
//!   resolved against the context's JSON without minijinja (`template::direct`), to the same
//!   result; anything else, or a lookup that does not resolve, goes through minijinja;
//! - an undefined variable fails the render, naming the variable.
//!
//! Values substituted into a template are never rendered again, so an input that contains
//! `{{secret.x}}` stays that literal text: users' data cannot read secrets.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use minijinja::{Environment, ErrorKind};
use serde_json::{Map, Value};

use super::bounded;
use super::direct::Direct;
use super::{
    check_spec, environment, is_template, lookup_path, TemplateError, TemplateRefs, RENDER_FUEL, RENDER_MAX_BYTES,
};
use crate::contract::RenderError;
use crate::secret::SecretValue;

/// What a template can read: `input`, `config` and `secret`.
#[derive(Debug, Clone, Default)]
pub struct RenderContext {
    pub input: Value,
    pub config: Value,
    pub secrets: BTreeMap<String, SecretValue>,
}

impl RenderContext {
    fn to_minijinja(&self) -> minijinja::Value {
        self.with_input(&self.input)
    }

    /// The context for a URL field: every input string percent-encoded (all but letters,
    /// digits and `-._~`), so a value from a job's input can fill a path segment or a query
    /// parameter but never change the URL's scheme, host or port.
    fn to_minijinja_for_url(&self) -> minijinja::Value {
        self.with_input(&percent_encode_strings(&self.input))
    }

    fn with_input(&self, input: &Value) -> minijinja::Value {
        let secrets: BTreeMap<&str, &str> = self.secrets.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        minijinja::context! { input => input, config => &self.config, secret => secrets }
    }

    /// Whether a dotted variable path (`input.user.name`) resolves in this context.
    fn resolves(&self, path: &str) -> bool {
        let (namespace, rest) = path.split_once('.').unwrap_or((path, ""));
        match namespace {
            "input" => rest.is_empty() || lookup_path(&self.input, rest).is_some(),
            "config" => rest.is_empty() || lookup_path(&self.config, rest).is_some(),
            "secret" => rest.is_empty() || self.secrets.contains_key(rest.split('.').next().unwrap_or_default()),
            _ => false,
        }
    }

    /// Replace every secret value in `text` (an error message, a response body) with a marker.
    pub fn redact(&self, text: &str) -> String {
        redact(text, self.secrets.values())
    }
}

/// Replace every form of every value in `secrets` found in `text` with `[redacted]` (see
/// [`Redactor`](crate::secret::redact::Redactor)).
pub fn redact<'a>(text: &str, secrets: impl IntoIterator<Item = &'a SecretValue>) -> String {
    crate::secret::redact::Redactor::new(secrets).redact(text)
}

/// Which compiled template a render uses: one per endpoint version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TemplateKey {
    pub endpoint: String,
    pub version: i32,
}

/// Renders endpoint specs. The built-in implementation is [`MinijinjaRenderer`]; a renderer
/// plugin implements the same trait.
#[async_trait]
pub trait Renderer: Send + Sync {
    /// Check a spec's templates at registration and gather what they refer to.
    async fn check(&self, root: &str, template: &Value) -> Result<TemplateRefs, TemplateError>;

    /// Render `template` (the spec of the endpoint version `key`) against `context`.
    async fn render(&self, key: &TemplateKey, template: &Value, context: &RenderContext) -> Result<Value, RenderError>;
}

/// A spec compiled once: the JSON tree, with templated strings pointing into `env`.
pub struct CompiledTemplate {
    env: Environment<'static>,
    root: Node,
    /// Render every string with minijinja (the tests compare the two ways).
    #[cfg(test)]
    minijinja_only: bool,
}

enum Node {
    Literal(Value),
    /// A templated string: its template's name in `env`, whether it is one whole expression
    /// (and so renders to JSON), the variables it reads (to name the one that is missing), and
    /// its place in the spec (to name it when it runs over its budget).
    Template {
        name: String,
        whole_expression: bool,
        variables: Vec<String>,
        field: String,
        /// The same string rendered without minijinja, when it only reads variables.
        direct: Option<Direct>,
    },
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

/// The expression inside a string that is exactly `{{ expression }}`, if it is one.
fn whole_expression(source: &str) -> Option<&str> {
    let inner = source.strip_prefix("{{")?.strip_suffix("}}")?;
    let nested = inner.contains("{{") || inner.contains("}}") || inner.contains("{%") || inner.contains("{#");
    (!nested && !inner.trim().is_empty()).then_some(inner)
}

impl CompiledTemplate {
    pub fn compile(template: &Value) -> Result<Self, TemplateError> {
        Self::compile_with(template, bounded::DEFAULT_BUILD_BYTES)
    }

    /// Compile `template` so that one render may build at most `build_bytes` of values
    /// (`template::bounded`).
    pub fn compile_with(template: &Value, build_bytes: usize) -> Result<Self, TemplateError> {
        let mut env = environment();
        env.add_filter("te_json", strict_json);
        bounded::install(&mut env, build_bytes);
        let mut count = 0usize;
        let root = Self::compile_node(&mut env, build_bytes, &mut count, "spec".to_owned(), template)?;
        Ok(Self {
            env,
            root,
            #[cfg(test)]
            minijinja_only: false,
        })
    }

    fn compile_node(
        env: &mut Environment<'static>,
        build_bytes: usize,
        count: &mut usize,
        field: String,
        value: &Value,
    ) -> Result<Node, TemplateError> {
        Ok(match value {
            Value::String(source) if is_template(source) => {
                *count += 1;
                let name = format!("t{count}");
                let (body, whole) = match whole_expression(source) {
                    Some(expr) => (format!("{{{{ ({expr}) | te_json }}}}"), true),
                    None => (source.clone(), false),
                };
                let error = |e: minijinja::Error| TemplateError {
                    field: field.clone(),
                    message: format!("template syntax error: {}", e.detail().unwrap_or("invalid template")),
                };
                // Read as written: syntax errors point into what the user wrote, and the
                // variables are the user's (not the checked functions the rewrite calls).
                let variables: Vec<String> =
                    env.template_from_str(&body).map_err(error)?.undeclared_variables(true).into_iter().collect();
                let rewritten = bounded::rewrite(&body, build_bytes)
                    .map_err(|message| TemplateError { field: field.clone(), message })?;
                let direct = Direct::parse(source);
                if direct.is_none() && rewritten.reads.contains("secret") {
                    return Err(TemplateError { field, message: SECRET_AS_IS.to_owned() });
                }
                env.add_template_owned(name.clone(), rewritten.source).map_err(error)?;
                Node::Template { name, whole_expression: whole, variables, direct, field }
            }
            Value::Array(items) => Node::Array(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| Self::compile_node(env, build_bytes, count, format!("{field}[{i}]"), item))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Node::Object(
                map.iter()
                    .map(|(k, v)| {
                        Ok((k.clone(), Self::compile_node(env, build_bytes, count, format!("{field}.{k}"), v)?))
                    })
                    .collect::<Result<_, TemplateError>>()?,
            ),
            other => Node::Literal(other.clone()),
        })
    }

    pub fn render(&self, context: &RenderContext) -> Result<Value, RenderError> {
        let contexts = Contexts { plain: std::cell::OnceCell::new(), url: std::cell::OnceCell::new(), of: context };
        let mut budget = RENDER_MAX_BYTES;
        self.render_node(&self.root, &contexts, &mut budget)
    }

    fn render_node(&self, node: &Node, contexts: &Contexts<'_>, budget: &mut usize) -> Result<Value, RenderError> {
        let context = contexts.of;
        Ok(match node {
            Node::Literal(v) => v.clone(),
            Node::Array(items) => {
                Value::Array(items.iter().map(|n| self.render_node(n, contexts, budget)).collect::<Result<_, _>>()?)
            }
            Node::Object(fields) => {
                let mut map = Map::with_capacity(fields.len());
                for (k, n) in fields {
                    map.insert(k.clone(), self.render_node(n, contexts, budget)?);
                }
                Value::Object(map)
            }
            Node::Template { name, whole_expression, variables, field, direct } => {
                let url = URL_FIELDS.contains(&field.as_str());
                if let Some((value, length)) = self.direct(direct.as_ref()).and_then(|d| d.render(context, url)) {
                    if length > *budget {
                        return Err(too_large(field));
                    }
                    *budget -= length;
                    return Ok(value);
                }
                let template = self.env.get_template(name).expect("compiled templates are registered");
                let ctx = if url {
                    contexts.url.get_or_init(|| context.to_minijinja_for_url())
                } else {
                    contexts.plain.get_or_init(|| context.to_minijinja())
                };
                // Written through a capped buffer: output past the spec's budget stops the render.
                let mut out = CappedWriter { bytes: Vec::new(), room: *budget, overflowed: false };
                let rendered = template.render_captured_to(ctx, &mut out);
                if out.overflowed {
                    return Err(too_large(field));
                }
                rendered.map_err(|e| match e.kind() {
                    ErrorKind::OutOfFuel => RenderError::new(
                        format!(
                            "`{field}`: the template took more than {RENDER_FUEL} steps to render (a loop over a large input?)"
                        ),
                        None,
                    ),
                    _ => render_error(&e, variables, context),
                })?;
                *budget -= out.bytes.len();
                let text = String::from_utf8(out.bytes)
                    .map_err(|_| RenderError::new(format!("`{field}`: the template rendered invalid UTF-8"), None))?;
                if *whole_expression {
                    serde_json::from_str(&text)
                        .map_err(|e| RenderError::new(format!("expression did not produce JSON: {e}"), None))?
                } else {
                    Value::String(text)
                }
            }
        })
    }
}

impl CompiledTemplate {
    /// The string's direct form, unless this template renders everything with minijinja.
    fn direct<'d>(&self, direct: Option<&'d Direct>) -> Option<&'d Direct> {
        #[cfg(test)]
        if self.minijinja_only {
            return None;
        }
        direct
    }
}

fn too_large(field: &str) -> RenderError {
    RenderError::new(format!("`{field}`: the rendered spec is larger than {RENDER_MAX_BYTES} bytes"), None)
}

/// Why a string that does more with a secret than substitute it is refused. A filter, an
/// operator or a block could turn the secret into a form redaction does not know (`|reverse`,
/// `|list|join(' ')`, a slice), which a receiver echoing its request would hand back to
/// whoever holds an API key.
pub const SECRET_AS_IS: &str = "a secret may only be substituted as it is (`{{ secret.NAME }}`, with literal \
     text and other such lookups around it): filters, operators, tests and blocks are refused in a string \
     that reads a secret, so no other form of the secret can be made";

/// The fields of a spec that are URLs: input values are percent-encoded into them.
const URL_FIELDS: [&str; 2] = ["spec.url", "spec.redis_url"];

/// One render's minijinja contexts, each made when a string first needs it: the plain one, and
/// the one with percent-encoded input for URL fields.
struct Contexts<'a> {
    plain: std::cell::OnceCell<minijinja::Value>,
    url: std::cell::OnceCell<minijinja::Value>,
    of: &'a RenderContext,
}

/// `value` with every string percent-encoded: all but letters, digits and `-._~` as `%XX`.
pub(super) fn percent_encode_strings(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(percent_encode(s)),
        Value::Array(items) => Value::Array(items.iter().map(percent_encode_strings).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), percent_encode_strings(v))).collect()),
        other => other.clone(),
    }
}

/// Every byte but the unreserved ones (RFC 3986: letters, digits, `-._~`) as `%XX`.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A render's output buffer that refuses to grow past `room` bytes.
struct CappedWriter {
    bytes: Vec<u8>,
    room: usize,
    overflowed: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.room {
            self.overflowed = true;
            return Err(std::io::Error::other("the rendered spec is too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `tojson` that refuses an undefined value instead of writing `null`.
fn strict_json(value: minijinja::Value) -> Result<String, minijinja::Error> {
    if value.is_undefined() {
        return Err(minijinja::Error::new(ErrorKind::UndefinedError, "undefined value"));
    }
    serde_json::to_string(&value).map_err(|e| minijinja::Error::new(ErrorKind::BadSerialization, e.to_string()))
}

fn render_error(error: &minijinja::Error, variables: &[String], context: &RenderContext) -> RenderError {
    if error.kind() == ErrorKind::UndefinedError {
        if let Some(missing) = variables.iter().find(|v| !context.resolves(v)) {
            return RenderError::new(format!("`{missing}` is not defined"), Some(missing.clone()));
        }
    }
    // minijinja's message can quote a value it failed on, which may be a secret.
    let detail = match error.detail() {
        Some(d) if d.starts_with(bounded::TOO_LARGE) => d.to_owned(),
        Some(d) => format!("{}: {d}", error.kind()),
        None => error.kind().to_string(),
    };
    RenderError::new(context.redact(&detail), None)
}

/// The built-in renderer, with its cache of compiled specs.
pub struct MinijinjaRenderer {
    compiled: RwLock<HashMap<TemplateKey, Arc<CompiledTemplate>>>,
    /// What one render may build in values (`TE_RENDER_MAX_BUILD_BYTES`).
    build_bytes: usize,
}

impl Default for MinijinjaRenderer {
    fn default() -> Self {
        Self::with_build_bytes(bounded::DEFAULT_BUILD_BYTES)
    }
}

/// Compiled specs kept at most; past it the cache starts over (endpoint versions are few and
/// compiling one takes microseconds, so a simple bound beats an LRU's bookkeeping).
const CACHE_LIMIT: usize = 10_000;

impl MinijinjaRenderer {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_build_bytes(build_bytes: usize) -> Self {
        Self { compiled: RwLock::default(), build_bytes }
    }

    /// The compiled spec for `key`, compiling it on first use.
    pub fn compiled(&self, key: &TemplateKey, template: &Value) -> Result<Arc<CompiledTemplate>, RenderError> {
        if let Some(hit) = self.compiled.read().expect("renderer cache lock").get(key) {
            return Ok(hit.clone());
        }
        let compiled = Arc::new(
            CompiledTemplate::compile_with(template, self.build_bytes)
                .map_err(|e| RenderError::new(format!("`{}`: {}", e.field, e.message), None))?,
        );
        let mut cache = self.compiled.write().expect("renderer cache lock");
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        Ok(cache.entry(key.clone()).or_insert(compiled).clone())
    }

    pub fn cached_count(&self) -> usize {
        self.compiled.read().expect("renderer cache lock").len()
    }
}

#[async_trait]
impl Renderer for MinijinjaRenderer {
    async fn check(&self, root: &str, template: &Value) -> Result<TemplateRefs, TemplateError> {
        let refs = check_spec(root, template)?;
        CompiledTemplate::compile_with(template, self.build_bytes)?;
        Ok(refs)
    }

    async fn render(&self, key: &TemplateKey, template: &Value, context: &RenderContext) -> Result<Value, RenderError> {
        self.compiled(key, template)?.render(context)
    }
}

#[cfg(test)]
mod tests;
