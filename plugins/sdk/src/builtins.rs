//! Produce to Kafka and append to Redis Streams through the host's own clients, as its `KAFKA`
//! and `REDIS_STREAM` endpoints do: a plugin can transform a message, fan it out, or wrap the
//! built-in transports without a client of its own. Each destination must be granted at
//! install (`--allow-host kafka://broker:9092`, `--allow-host redis://cache:6379`); a call
//! outside `deliver` is refused.
//!
//! ```ignore
//! let spec = KafkaSpec::new("broker:9092", "orders", &serde_json::json!({"id": 7})).key("order-7");
//! let output = builtins::produce(&spec)?; // {"partition": 0, "offset": 41}
//! ```

use serde_json::Value;

pub use crate::bindings::taskexec::plugin::specs::{
    HttpSpec, KafkaAcks, KafkaSasl, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSpec, RedisStreamSpec,
};
use crate::bindings::taskexec::plugin::{kafka, redis_streams, specs};
use crate::{fail, Failure};

impl KafkaSpec {
    /// A record of `value` for `topic`, with a `KAFKA` endpoint's defaults: no key, acks from
    /// all in-sync replicas, 10 s to be acknowledged, plaintext.
    pub fn new(bootstrap_servers: &str, topic: &str, value: &Value) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.to_owned(),
            topic: topic.to_owned(),
            key: None,
            value_json: value.to_string(),
            headers: Vec::new(),
            acks: KafkaAcks::All,
            timeout_ms: 10_000,
            security_protocol: KafkaSecurityProtocol::Plaintext,
            sasl: None,
            ssl_ca_pem: None,
        }
    }

    /// The record's key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// A record header (beside the `te-execution-id` and `traceparent` the host adds).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl RedisStreamSpec {
    /// An entry of `fields` for `stream`, with a `REDIS_STREAM` endpoint's defaults: no
    /// trimming, 3 s to answer.
    pub fn new(redis_url: &str, stream: &str, fields: Vec<(String, String)>) -> Self {
        Self {
            redis_url: redis_url.to_owned(),
            stream: stream.to_owned(),
            fields,
            max_len: None,
            approximate_trimming: true,
            timeout_ms: 3_000,
            tls_ca_pem: None,
        }
    }

    /// Trim the stream to about `max_len` entries.
    pub fn max_len(mut self, max_len: u64) -> Self {
        self.max_len = Some(max_len);
        self
    }
}

/// Produce one record; what a `KAFKA` endpoint records as its output
/// (`{"partition": …, "offset": …}`).
pub fn produce(spec: &KafkaSpec) -> Result<Value, Failure> {
    output(kafka::produce(spec)?)
}

/// Append one entry; what a `REDIS_STREAM` endpoint records as its output
/// (`{"message_id": …, "stream": …}`).
pub fn append(spec: &RedisStreamSpec) -> Result<Value, Failure> {
    output(redis_streams::append(spec)?)
}

/// An `HTTP` endpoint's spec in its JSON shape, read and checked by the host as registration
/// does (defaults filled in; the error names the field).
pub fn http_spec(spec: &Value) -> Result<HttpSpec, String> {
    specs::http_from_json(&spec.to_string())
}

/// A `KAFKA` endpoint's spec in its JSON shape (`value_template` rendered), read by the host.
pub fn kafka_spec(spec: &Value) -> Result<KafkaSpec, String> {
    specs::kafka_from_json(&spec.to_string())
}

/// A `REDIS_STREAM` endpoint's spec in its JSON shape (`fields_template` rendered), read by
/// the host.
pub fn redis_stream_spec(spec: &Value) -> Result<RedisStreamSpec, String> {
    specs::redis_stream_from_json(&spec.to_string())
}

fn output(json: String) -> Result<Value, Failure> {
    serde_json::from_str(&json).map_err(|e| fail::internal(format!("the host's output is not JSON: {e}")))
}
