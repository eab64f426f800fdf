//! Transports: how a rendered message leaves the service.
//!
//! [`Transport`] is the one interface the rest of the service delivers through. The built-in
//! implementations live in `http/`, `kafka/` and `redis_stream/`, each with the same shape:
//! `spec.rs` (the endpoint spec, its defaults and registration checks), `mod.rs` (the
//! delivery), and tests against a real peer. A wasm plugin implements the same trait, so
//! callers never ask which kind they hold. [`Transports::for_endpoint`] is the one place that
//! picks an implementation by endpoint type.

pub mod clients;
pub mod http;
pub mod kafka;
pub mod redis_stream;
pub mod wasm;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::contract::{Failure, FailureKind, Message, Receipt};
use crate::domain::AttemptErrorType;
pub use crate::domain::EndpointType;
use crate::template;

/// A way to deliver a message. Mirrors the WIT `transport` interface.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Check an endpoint spec at registration; returns it with defaults filled in.
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError>;

    /// Deliver one message (one attempt). Must finish by `message.deadline_ms`. Lines added to
    /// `delivery` go to the attempt's logs (a plugin's own records, say); its trace context is
    /// sent along where the transport has a place for it.
    async fn deliver(&self, message: Message, delivery: &Delivery) -> Result<Receipt, Failure>;

    /// The error object an attempt records for `failure`, in docs/api.md's shape per transport
    /// (`{"type": "TIMEOUT", "message": …}`). The default names a refusal `REJECTED`.
    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, AttemptErrorType::Rejected, None)
    }

    /// The hosts a delivery of this rendered spec reaches, for secrets that name the hosts
    /// they may be sent to (`crate::secret::hosts`). The default: not known before delivery.
    async fn destinations(&self, spec: &Value) -> Destinations {
        let _ = spec;
        Destinations::Unknown
    }
}

pub use crate::secret::hosts::Destinations;

/// The host of a URL-valued field of a rendered spec; [`Destinations::Unknown`] when it does
/// not parse (the delivery then fails on the same URL).
pub fn url_destination(spec: &Value, field: &str) -> Destinations {
    let host = spec.get(field).and_then(Value::as_str).and_then(|text| url::Url::parse(text).ok()).map(|url| {
        // `unix:///run/redis.sock` and the like: this machine.
        url_host(&url).unwrap_or_else(|| "localhost".to_owned())
    });
    host.map_or(Destinations::Unknown, |host| Destinations::Hosts(vec![host]))
}

/// A URL's host as grants and host lists read it: a name, or an address without brackets.
pub fn url_host(url: &url::Url) -> Option<String> {
    Some(match url.host()? {
        url::Host::Domain(name) => name.to_owned(),
        url::Host::Ipv4(v4) => v4.to_string(),
        url::Host::Ipv6(v6) => v6.to_string(),
    })
}

/// The error object of docs/api.md: `type` from the failure kind (`rejected_type` for a refusal, with
/// its code under `code_field` when there is one), the message, and whether it is retryable.
pub fn error_json(failure: &Failure, rejected_type: AttemptErrorType, code_field: Option<&str>) -> Value {
    let mut error = json!({
        "type": match failure.kind {
            FailureKind::Timeout => AttemptErrorType::Timeout,
            FailureKind::Connection => AttemptErrorType::ConnectionError,
            FailureKind::Rejected(_) => rejected_type,
            FailureKind::InvalidSpec => AttemptErrorType::InvalidSpec,
            FailureKind::Internal => AttemptErrorType::InternalError,
        },
        "message": failure.message,
        "retryable": failure.retryable,
    });
    if let (FailureKind::Rejected(Some(code)), Some(field)) = (&failure.kind, code_field) {
        error[field] = json!(code);
    }
    error
}

/// What one delivery carries beside its message: the attempt's trace context, which the
/// built-in transports send on (`traceparent`: an HTTP or Kafka header, a Redis Stream field)
/// unless the spec sets its own, and the log lines a transport adds to the attempt, at most
/// [`Delivery::MAX_LINES`] (a count of the rest is added at the end).
#[derive(Debug, Default)]
pub struct Delivery {
    pub traceparent: Option<crate::trace::TraceParent>,
    lines: std::sync::Mutex<(Vec<(&'static str, String)>, usize)>,
    /// Present when the endpoint has a classifier: the transport keeps the receiver's raw
    /// answer here for it (only then: copying headers and body costs every delivery).
    answer: Option<std::sync::Mutex<Option<ReceiverAnswer>>>,
    /// The endpoint version delivered for, when the worker knows it: deliveries of one
    /// endpoint version may share a plugin instance (`calls_per_instance`), others never do.
    pub endpoint: Option<EndpointVersion>,
}

/// One version of an endpoint, by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointVersion {
    pub name: String,
    pub version: i32,
}

/// A receiver's answer as a classifier sees it (HTTP: the status, headers and first bytes of
/// the body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverAnswer {
    pub status: Option<u16>,
    /// Names in lower case, in the order received; at most [`ReceiverAnswer::MAX_HEADERS`].
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl ReceiverAnswer {
    pub const MAX_HEADERS: usize = 64;
}

impl Delivery {
    /// Lines kept per attempt; the stored attempt keeps fewer still (see `store::storable`).
    pub const MAX_LINES: usize = 500;

    /// A delivery that continues the trace `traceparent` names.
    pub fn traced(traceparent: Option<crate::trace::TraceParent>) -> Self {
        Self { traceparent, lines: Default::default(), answer: None, endpoint: None }
    }

    /// A delivery for `endpoint`.
    pub fn for_endpoint(mut self, endpoint: EndpointVersion) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// Ask the transport to keep the receiver's answer (for a classifier).
    pub fn keeping_answer(mut self) -> Self {
        self.answer = Some(Default::default());
        self
    }

    /// Whether the receiver's answer is wanted.
    pub fn wants_answer(&self) -> bool {
        self.answer.is_some()
    }

    /// Keep the receiver's answer, when it is wanted.
    pub fn keep_answer(&self, answer: ReceiverAnswer) {
        if let Some(slot) = &self.answer {
            *slot.lock().expect("delivery answer lock") = Some(answer);
        }
    }

    /// The headers of the answer kept, as a JSON object (a repeated name keeps its last
    /// value), leaving the answer kept.
    pub fn answer_headers(&self) -> Option<serde_json::Value> {
        let slot = self.answer.as_ref()?.lock().expect("delivery answer lock");
        let headers = slot.as_ref()?.headers.iter().map(|(name, value)| (name.clone(), serde_json::json!(value)));
        Some(serde_json::Value::Object(headers.collect()))
    }

    /// The answer kept, if the transport kept one.
    pub fn take_answer(&self) -> Option<ReceiverAnswer> {
        self.answer.as_ref().and_then(|slot| slot.lock().expect("delivery answer lock").take())
    }

    pub fn push(&self, level: &'static str, message: String) {
        let mut lines = self.lines.lock().expect("delivery log lock");
        if lines.0.len() < Self::MAX_LINES {
            lines.0.push((level, message));
        } else {
            lines.1 += 1;
        }
    }

    pub fn take(&self) -> Vec<(&'static str, String)> {
        let (mut lines, dropped) = std::mem::take(&mut *self.lines.lock().expect("delivery log lock"));
        if dropped > 0 {
            lines.push(("WARN", format!("{dropped} more log lines of this delivery were dropped.")));
        }
        lines
    }
}

/// The built-in transports whose clients plugins may use too (Kafka producers, Redis
/// connections): one set per process, shared by KAFKA and REDIS_STREAM endpoints and by the
/// plugins' `kafka` and `redis-streams` imports, so a plugin wrapping them opens no pool of its own.
#[derive(Clone)]
pub struct PooledTransports {
    pub kafka: Arc<kafka::KafkaTransport>,
    pub redis_stream: Arc<redis_stream::RedisStreamTransport>,
}

impl PooledTransports {
    /// Every connection held to the operator's egress `policy`.
    pub fn with_policy(policy: Arc<crate::egress::EgressPolicy>) -> Self {
        Self {
            kafka: Arc::new(kafka::KafkaTransport::with_policy(policy.clone())),
            redis_stream: Arc::new(redis_stream::RedisStreamTransport::with_policy(policy)),
        }
    }
}

impl Default for PooledTransports {
    fn default() -> Self {
        Self::with_policy(Arc::default())
    }
}

/// Every transport, created once and shared: the built-in ones hold their connection pools,
/// and plugins are reached through the plugin host.
#[derive(Clone)]
pub struct Transports {
    http: Arc<http::HttpTransport>,
    kafka: Arc<kafka::KafkaTransport>,
    redis_stream: Arc<redis_stream::RedisStreamTransport>,
    plugins: crate::plugin::PluginHost,
}

impl Transports {
    /// Deliveries held to the operator's egress `policy`. Kafka and Redis clients are the
    /// plugin host's (made under the same policy), shared with plugins that produce through it.
    pub fn with_egress(plugins: crate::plugin::PluginHost, policy: Arc<crate::egress::EgressPolicy>) -> Self {
        let pooled = plugins.pooled().clone();
        Self {
            http: Arc::new(http::HttpTransport::with_policy(policy)),
            kafka: pooled.kafka,
            redis_stream: pooled.redis_stream,
            plugins,
        }
    }

    /// The plugin host PLUGIN endpoints (and classifiers) are called through.
    pub fn plugins(&self) -> &crate::plugin::PluginHost {
        &self.plugins
    }

    /// The transport of an endpoint: built in by type, or the plugin a PLUGIN endpoint names.
    pub fn for_endpoint(
        &self,
        endpoint_type: EndpointType,
        plugin: Option<&crate::plugin::PluginRef>,
    ) -> Result<Arc<dyn Transport>, SpecError> {
        Ok(match endpoint_type {
            EndpointType::Http => self.http.clone(),
            EndpointType::Kafka => self.kafka.clone(),
            EndpointType::RedisStream => self.redis_stream.clone(),
            EndpointType::Plugin => {
                let plugin = plugin.ok_or_else(|| SpecError::new("plugin", "is required for a PLUGIN endpoint"))?;
                Arc::new(wasm::WasmTransport { host: self.plugins.clone(), plugin: plugin.clone() })
            }
        })
    }
}

/// How long a delivery may take: the spec's timeout, cut short by the message's deadline.
/// A deadline already past is a timeout failure.
pub fn delivery_timeout(timeout_ms: u64, deadline_ms: u64) -> Result<Duration, Failure> {
    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let remaining = deadline_ms.saturating_sub(now_ms);
    if remaining == 0 {
        return Err(Failure::timeout("the attempt's deadline passed before delivery started"));
    }
    Ok(Duration::from_millis(timeout_ms.min(remaining)))
}

/// Parse a rendered spec carried in a message; a spec that no longer fits is not retryable.
pub fn rendered_spec<S: DeserializeOwned>(message: &Message) -> Result<S, Failure> {
    serde_json::from_str(&message.spec_json)
        .map_err(|e| Failure::invalid_spec(format!("the rendered spec is invalid: {e}")))
}

/// An address the egress policy refused: permanent (a retry meets the same policy), said plainly.
pub fn egress_refused(denied: &crate::egress::EgressDenied) -> Failure {
    Failure::invalid_spec(format!("egress: {denied}"))
}

/// Why a `peer` ("Redis", "Kafka") host cannot be connected to: refused by the egress policy
/// (permanent), or not resolvable now (retryable).
pub fn cannot_reach(peer: &str, error: crate::egress::ResolveError) -> Failure {
    match error {
        crate::egress::ResolveError::Denied(denied) => egress_refused(&denied),
        lookup @ crate::egress::ResolveError::Lookup { .. } => Failure::connection(format!("{peer}: {lookup}")),
    }
}

/// A successful receipt carrying `output` as JSON text.
pub fn receipt(output: Value) -> Receipt {
    Receipt { output_json: serde_json::to_string(&output).expect("a JSON value serializes") }
}

/// A spec that cannot be used: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: String,
    pub message: String,
}

impl SpecError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// A transport's endpoint spec: parsed from JSON, then checked as a whole.
pub trait EndpointSpec: DeserializeOwned + Serialize {
    /// Checks serde cannot express. Field names in errors are relative to the spec.
    fn validate(&self) -> Result<(), SpecError>;
}

/// Parse and check `spec` for an endpoint of type `kind`; returns it with defaults filled in.
/// Error fields are prefixed with `spec.`.
pub fn normalize_spec(kind: EndpointType, spec: &Value) -> Result<Value, SpecError> {
    match kind {
        EndpointType::Http => normalize::<http::HttpSpec>(spec),
        EndpointType::Kafka => normalize::<kafka::KafkaSpec>(spec),
        EndpointType::RedisStream => normalize::<redis_stream::RedisStreamSpec>(spec),
        // A plugin's spec is its own to check (its `validate`); here only its shape.
        EndpointType::Plugin if spec.is_object() => Ok(spec.clone()),
        EndpointType::Plugin => Err(SpecError::new("spec", "must be an object")),
    }
}

fn normalize<S: EndpointSpec>(spec: &Value) -> Result<Value, SpecError> {
    let parsed: S = parse_spec(spec).map_err(|e| match e.field.as_str() {
        "" => SpecError::new("spec", e.message),
        field => SpecError::new(format!("spec.{field}"), e.message),
    })?;
    Ok(serde_json::to_value(&parsed).expect("a spec that deserialized serializes"))
}

/// A built-in spec read and checked as registration does, errors naming the field (an empty
/// field: the spec as a whole).
pub fn parse_spec<S: EndpointSpec>(spec: &Value) -> Result<S, SpecError> {
    if !spec.is_object() {
        return Err(SpecError::new("", "must be an object"));
    }
    let parsed: S = serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        SpecError::new(if path == "." { String::new() } else { path }, e.into_inner().to_string())
    })?;
    parsed.validate()?;
    Ok(parsed)
}

/// A timeout in milliseconds must be positive and at most `max_ms`.
pub(crate) fn check_timeout(field: &str, value: u64, max_ms: u64) -> Result<(), SpecError> {
    if value == 0 || value > max_ms {
        return Err(SpecError::new(field, format!("must be between 1 and {max_ms} milliseconds, got {value}")));
    }
    Ok(())
}

/// A required string: present and not blank.
pub(crate) fn check_non_empty(field: &str, value: &str) -> Result<(), SpecError> {
    if value.trim().is_empty() {
        return Err(SpecError::new(field, "must not be empty"));
    }
    Ok(())
}

/// Literal (untemplated) values can be checked now; templated ones only after rendering.
pub(crate) fn literal(value: &str) -> Option<&str> {
    (!template::may_be_template(value)).then_some(value)
}

/// The longest a delivery may take (every transport's `timeout_ms` is capped by it). The worker
/// extends its lease on an execution to cover the attempt's whole timeout.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

/// A delivery's timeout when neither the endpoint nor its spec sets one (a plugin's).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// How long a delivery to `endpoint` may take: the endpoint's `timeout_ms`, else its spec's
/// (the built-in transports' specs have one, filled in with their default), else
/// [`DEFAULT_TIMEOUT_MS`]; never more than [`MAX_TIMEOUT_MS`].
pub fn delivery_timeout_ms(endpoint: &crate::store::Endpoint, rendered_spec: &serde_json::Value) -> u64 {
    let own = endpoint.timeout_ms.and_then(|t| u64::try_from(t).ok());
    own.or_else(|| rendered_spec.get("timeout_ms").and_then(serde_json::Value::as_u64))
        .unwrap_or(DEFAULT_TIMEOUT_MS)
        .clamp(1, MAX_TIMEOUT_MS)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA and a server certificate it signs for `localhost` and 127.0.0.1, made with openssl
    /// in `dir`: `ca.pem`, `server.pem` and `server.key` there; the CA's PEM is returned.
    pub fn make_certificates(dir: &std::path::Path) -> String {
        let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
        let openssl = |args: &[&str]| {
            let out = std::process::Command::new("openssl").args(args).output().expect("openssl runs");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        let (ca_key, ca_pem) = (path("ca.key"), path("ca.pem"));
        openssl(
            &[
                &["req", "-subj", "/CN=te-test-ca", "-x509"][..],
                &ec,
                &["-keyout", &ca_key, "-out", &ca_pem, "-days", "1"],
            ]
            .concat(),
        );
        let (key, csr) = (path("server.key"), path("server.csr"));
        openssl(&[&["req", "-subj", "/CN=localhost"][..], &ec, &["-keyout", &key, "-out", &csr]].concat());
        std::fs::write(path("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
        let (ext, server) = (path("ext"), path("server.pem"));
        let sign = ["x509", "-req", "-in", &csr, "-CA", &ca_pem, "-CAkey", &ca_key, "-CAcreateserial"];
        openssl(&[&sign[..], &["-out", &server, "-days", "1", "-extfile", &ext]].concat());
        std::fs::read_to_string(ca_pem).unwrap()
    }

    /// A message for `spec` (a normalized, rendered spec) with 30 s to its deadline.
    pub fn message(execution_id: &str, spec: &Value) -> Message {
        Message {
            execution_id: execution_id.to_owned(),
            attempt: 1,
            idempotency_key: execution_id.to_owned(),
            deadline_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + 30_000,
            spec_json: spec.to_string(),
        }
    }

    /// A receiver on 127.0.0.1 that answers its first request with a head promising ten bytes
    /// of body, sends two, and then nothing until the client gives up.
    pub async fn stalling_receiver() -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = [0u8; 4096];
            let _ = socket.read(&mut buffer).await;
            let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nok").await;
            let _ = socket.read(&mut buffer).await;
        });
        addr
    }

    #[test]
    fn error_json_has_the_documented_shape() {
        let f = Failure::rejected(Some(503), true, "HTTP 503");
        assert_eq!(
            error_json(&f, AttemptErrorType::HttpError, Some("status_code")),
            json!({"type": "HTTP_ERROR", "status_code": 503, "message": "HTTP 503", "retryable": true})
        );
        assert_eq!(error_json(&Failure::timeout("t"), AttemptErrorType::Rejected, None)["type"], "TIMEOUT");
        assert_eq!(
            error_json(&Failure::rejected(None, false, "m"), AttemptErrorType::StreamError, Some("code")).get("code"),
            None
        );
    }

    #[test]
    fn errors_name_the_field_under_spec() {
        let err = normalize_spec(EndpointType::Http, &json!({"url": "https://x", "method": "FETCH"})).unwrap_err();
        assert_eq!(err.field, "spec.method");
        let err = normalize_spec(EndpointType::Http, &json!({"method": "POST"})).unwrap_err();
        assert_eq!(err.field, "spec");
        assert!(err.message.contains("url"), "{}", err.message);
        let err = normalize_spec(EndpointType::Kafka, &json!([])).unwrap_err();
        assert_eq!(err.field, "spec");
    }

    #[test]
    fn endpoint_type_names_round_trip() {
        for t in [EndpointType::Http, EndpointType::Kafka, EndpointType::RedisStream, EndpointType::Plugin] {
            assert_eq!(t.as_str().parse::<EndpointType>(), Ok(t));
            assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
        }
        assert!("FTP".parse::<EndpointType>().is_err());
    }
}
