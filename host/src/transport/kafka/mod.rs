//! The Kafka transport: one librdkafka producer per (bootstrap servers, acks, timeout,
//! security settings), shared by every delivery to that cluster and kept in a bounded cache
//! ([`ClientCache`]). Producers are idempotent when `acks` is `all`, so librdkafka's own retries
//! never duplicate or reorder a partition's messages.
//!
//! Egress: librdkafka resolves and connects by itself, and the Rust binding offers no hook into
//! its resolver or connector. So the bootstrap servers are resolved and checked by us and
//! librdkafka is handed the checked addresses (over TLS, the checked names: a broker's
//! certificate is verified against its name, so librdkafka resolves them again); then, before
//! the producer's first message, the cluster's metadata is read and every broker it advertises
//! is checked too, and a producer whose cluster names a refused broker is never used. What this
//! leaves open (written in docs/reliability.md): librdkafka opens connections to advertised
//! brokers by itself, before that check, and resolves their names itself.

mod spec;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::ClientConfig;
use serde_json::{json, Value};

pub use spec::{Acks, KafkaSpec, Sasl, SaslMechanism, SecurityProtocol};

use super::clients::ClientCache;
use super::{
    cannot_reach, delivery_timeout, error_json, normalize_spec, receipt, rendered_spec, Delivery, EndpointType,
    SpecError, Transport,
};
use crate::contract::{Failure, Message, Receipt};
use crate::domain::AttemptErrorType;
use crate::egress::{self, EgressPolicy, ResolveError};
use crate::trace::TRACEPARENT;

/// The header every message carries: receivers deduplicate retries on it.
pub const EXECUTION_ID_HEADER: &str = "te-execution-id";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProducerKey {
    bootstrap_servers: String,
    acks: Acks,
    timeout_ms: u64,
    security_protocol: SecurityProtocol,
    /// Its `Debug` hides the password.
    sasl: Option<Sasl>,
    ssl_ca_pem: Option<String>,
}

impl From<&KafkaSpec> for ProducerKey {
    fn from(spec: &KafkaSpec) -> Self {
        Self {
            bootstrap_servers: spec.bootstrap_servers.clone(),
            acks: spec.acks,
            timeout_ms: spec.timeout_ms,
            security_protocol: spec.security_protocol,
            sasl: spec.sasl.clone(),
            ssl_ca_pem: spec.ssl_ca_pem.clone(),
        }
    }
}

pub struct KafkaTransport {
    producers: ClientCache<ProducerKey, FutureProducer>,
    policy: Arc<EgressPolicy>,
}

impl Default for KafkaTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl KafkaTransport {
    /// Under the default egress policy.
    pub fn new() -> Self {
        Self::with_policy(Arc::default())
    }

    /// Every cluster held to `policy`: its bootstrap servers and the brokers it advertises.
    pub fn with_policy(policy: Arc<EgressPolicy>) -> Self {
        Self { producers: ClientCache::default(), policy }
    }

    async fn producer(&self, key: ProducerKey, timeout: Duration) -> Result<FutureProducer, Failure> {
        if let Some(producer) = self.producers.get(&key).await {
            return Ok(producer);
        }
        let settings = key.clone();
        let connect = async {
            let checked = self.checked_bootstrap(&settings.bootstrap_servers).await?;
            // Over TLS librdkafka verifies each broker's certificate against the name it was
            // given, so it gets the names (checked above, resolved again by it).
            let bootstrap = if settings.security_protocol.tls() { settings.bootstrap_servers.clone() } else { checked };
            let producer = create_producer(&settings, &bootstrap)?;
            let brokers = broker_addresses(producer.clone(), timeout).await?;
            for (host, port) in brokers {
                egress::resolve_allowed(&self.policy, &host, port).await.map_err(|e| match e {
                    ResolveError::Denied(denied) => Failure::invalid_spec(format!(
                        "egress: the cluster advertises broker {host}:{port}, and {denied}"
                    )),
                    lookup => cannot_reach("Kafka", lookup),
                })?;
            }
            Ok(producer)
        };
        self.producers.get_or_connect(key, connect).await
    }

    /// The bootstrap servers as addresses the egress policy allows (`host:port,…`).
    async fn checked_bootstrap(&self, servers: &str) -> Result<String, Failure> {
        let mut checked = Vec::new();
        for server in servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (host, port) = host_and_port(server)
                .ok_or_else(|| Failure::invalid_spec(format!("bootstrap server `{server}` is not host:port")))?;
            let allowed =
                egress::resolve_allowed(&self.policy, host, port).await.map_err(|e| cannot_reach("Kafka", e))?;
            checked.extend(allowed.iter().map(|a| a.to_string()));
        }
        if checked.is_empty() {
            return Err(Failure::invalid_spec("bootstrap_servers rendered to no server"));
        }
        Ok(checked.join(","))
    }
}

/// `host:port` (`[v6]:port`, an optional `PLAINTEXT://` in front; 9092 when no port is given).
pub(crate) fn host_and_port(server: &str) -> Option<(&str, u16)> {
    let server = server.split_once("://").map_or(server, |(_, rest)| rest);
    if let Some(v6) = server.strip_prefix('[') {
        let (host, rest) = v6.split_once(']')?;
        let port = match rest.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if rest.is_empty() => 9092,
            None => return None,
        };
        return Some((host, port));
    }
    match server.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((server, 9092)),
    }
    .filter(|(host, _)| !host.is_empty())
}

/// The producer's librdkafka settings.
fn client_config(key: &ProducerKey, bootstrap: &str) -> ClientConfig {
    let acks = match key.acks {
        Acks::None => "0",
        Acks::Leader => "1",
        Acks::All => "all",
    };
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("enable.idempotence", if key.acks == Acks::All { "true" } else { "false" })
        // librdkafka gives up on a message after this long, retries included.
        .set("message.timeout.ms", key.timeout_ms.to_string())
        // Deliveries are latency-bound, not batch-bound: send almost at once.
        .set("linger.ms", "1")
        .set("security.protocol", key.security_protocol.as_str());
    if let Some(sasl) = &key.sasl {
        config
            .set("sasl.mechanism", sasl.mechanism.as_str())
            .set("sasl.username", &sasl.username)
            .set("sasl.password", &sasl.password);
    }
    if let Some(ca) = &key.ssl_ca_pem {
        config.set("ssl.ca.pem", ca);
    }
    config
}

fn create_producer(key: &ProducerKey, bootstrap: &str) -> Result<FutureProducer, Failure> {
    // librdkafka names the property at fault; the password is never one it quotes (no value
    // of it is invalid to librdkafka).
    client_config(key, bootstrap)
        .create()
        .map_err(|e| Failure::invalid_spec(format!("cannot create a Kafka producer with these settings: {e}")))
}

/// Every broker the cluster advertises, read from its metadata (a blocking call, so off the
/// async threads).
async fn broker_addresses(producer: FutureProducer, timeout: Duration) -> Result<Vec<(String, u16)>, Failure> {
    use rdkafka::producer::Producer;
    tokio::task::spawn_blocking(move || {
        let metadata =
            producer.client().fetch_metadata(None, Timeout::After(timeout)).map_err(|e| kafka_failure(&e))?;
        Ok(metadata.brokers().iter().map(|b| (b.host().to_owned(), u16::try_from(b.port()).unwrap_or(0))).collect())
    })
    .await
    .map_err(|e| Failure::internal(true, format!("reading the cluster's metadata failed: {e}")))?
}

#[async_trait]
impl Transport for KafkaTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        normalize_spec(EndpointType::Kafka, spec)
    }

    async fn deliver(&self, message: Message, delivery: &Delivery) -> Result<Receipt, Failure> {
        let spec: KafkaSpec = rendered_spec(&message)?;
        let timeout = delivery_timeout(spec.timeout_ms, message.deadline_ms)?;
        let key = ProducerKey::from(&spec);
        let started = std::time::Instant::now();
        let producer = tokio::time::timeout(timeout, self.producer(key, timeout))
            .await
            .map_err(|_| Failure::timeout(format!("no Kafka cluster metadata within {} ms", timeout.as_millis())))??;
        // A first delivery to a cluster spent part of its time connecting.
        let timeout = timeout.saturating_sub(started.elapsed());
        if timeout.is_zero() {
            return Err(Failure::timeout("the timeout passed while connecting to the cluster"));
        }

        let value = serde_json::to_vec(&spec.value_template).expect("JSON serializes");
        let mut headers = OwnedHeaders::new_with_capacity(spec.headers.len() + 2)
            .insert(Header { key: EXECUTION_ID_HEADER, value: Some(message.execution_id.as_bytes()) });
        if let Some(traceparent) = &delivery.traceparent {
            if !spec.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(TRACEPARENT)) {
                headers = headers.insert(Header { key: TRACEPARENT, value: Some(traceparent.as_str().as_bytes()) });
            }
        }
        for (name, value) in &spec.headers {
            headers = headers.insert(Header { key: name.as_str(), value: Some(value.as_bytes()) });
        }
        let mut record = FutureRecord::to(&spec.topic).payload(&value).headers(headers);
        if let Some(key) = &spec.key_template {
            record = record.key(key);
        }

        let send = producer.send(record, Timeout::After(timeout));
        match tokio::time::timeout(timeout + Duration::from_millis(500), send).await {
            Err(_) => Err(Failure::timeout(format!("no broker acknowledgement within {} ms", timeout.as_millis()))),
            Ok(Ok(acked)) => Ok(receipt(json!({ "partition": acked.partition, "offset": acked.offset }))),
            Ok(Err((error, _message))) => Err(kafka_failure(&error)),
        }
    }

    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, AttemptErrorType::BrokerError, Some("code"))
    }

    /// The bootstrap brokers. The cluster's metadata may name further brokers, which the
    /// producer then reaches as well: a secret sent to a cluster is trusted to all of it.
    async fn destinations(&self, spec: &Value) -> super::Destinations {
        match spec.get("bootstrap_servers").and_then(Value::as_str) {
            Some(servers) => super::Destinations::Hosts(servers.split(',').filter_map(broker_host).collect()),
            None => super::Destinations::Unknown,
        }
    }
}

/// The host of one `bootstrap.servers` entry: `host:port`, `[v6]:port` or
/// `PROTOCOL://host:port`.
fn broker_host(entry: &str) -> Option<String> {
    let entry = entry.trim();
    let entry = entry.split_once("://").map_or(entry, |(_, rest)| rest);
    let host = match entry.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') && (!host.contains(':') || host.ends_with(']')) => host,
        _ => entry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| host.to_owned())
}

/// Errors a later attempt cannot cure: the message or the permissions must change first.
const NOT_RETRYABLE: [RDKafkaErrorCode; 7] = [
    RDKafkaErrorCode::MessageSizeTooLarge,
    RDKafkaErrorCode::InvalidMessageSize,
    RDKafkaErrorCode::TopicAuthorizationFailed,
    RDKafkaErrorCode::ClusterAuthorizationFailed,
    RDKafkaErrorCode::InvalidRecord,
    RDKafkaErrorCode::InvalidTopic,
    RDKafkaErrorCode::InvalidRequiredAcks,
];

fn kafka_failure(error: &KafkaError) -> Failure {
    let message = format!("Kafka: {error}");
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageTimedOut | RDKafkaErrorCode::RequestTimedOut) => Failure::timeout(message),
        Some(
            RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::Resolve,
        ) => Failure::connection(message),
        Some(code) => {
            // Broker error codes are small positive numbers; librdkafka's local ones are negative.
            let broker_code = u16::try_from(code as i32).ok();
            Failure::rejected(broker_code, !NOT_RETRYABLE.contains(&code), message)
        }
        None => Failure::internal(true, message),
    }
}
