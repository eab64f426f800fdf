//! The Kafka transport: one librdkafka producer per (bootstrap servers, acks, timeout), shared
//! by every delivery to that cluster. Producers are idempotent when `acks` is `all`, so
//! librdkafka's own retries never duplicate or reorder a partition's messages.

mod spec;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::ClientConfig;
use serde_json::{json, Value};

pub use spec::{Acks, KafkaSpec};

use super::{
    delivery_timeout, error_json, normalize_spec, receipt, rendered_spec, DeliveryLog, EndpointType, SpecError,
    Transport,
};
use crate::contract::{Failure, Message, Receipt};

/// The header every message carries: receivers deduplicate retries on it.
pub const EXECUTION_ID_HEADER: &str = "te-execution-id";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ProducerKey {
    bootstrap_servers: String,
    acks: Acks,
    timeout_ms: u64,
}

#[derive(Default)]
pub struct KafkaTransport {
    // A std Mutex: it is held only to look up or insert, never across an await.
    producers: Mutex<HashMap<ProducerKey, FutureProducer>>,
}

impl KafkaTransport {
    pub fn new() -> Self {
        Self::default()
    }

    fn producer(&self, key: ProducerKey) -> Result<FutureProducer, Failure> {
        let mut producers = self.producers.lock().expect("producer map lock");
        if let Some(producer) = producers.get(&key) {
            return Ok(producer.clone());
        }
        let acks = match key.acks {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        };
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &key.bootstrap_servers)
            .set("acks", acks)
            .set("enable.idempotence", if key.acks == Acks::All { "true" } else { "false" })
            // librdkafka gives up on a message after this long, retries included.
            .set("message.timeout.ms", key.timeout_ms.to_string())
            // Deliveries are latency-bound, not batch-bound: send almost at once.
            .set("linger.ms", "1")
            .create()
            .map_err(|e| {
                Failure::invalid_spec(format!("cannot create a Kafka producer for these bootstrap servers: {e}"))
            })?;
        producers.insert(key, producer.clone());
        Ok(producer)
    }
}

#[async_trait]
impl Transport for KafkaTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        normalize_spec(EndpointType::Kafka, spec)
    }

    async fn deliver(&self, message: Message, _log: &DeliveryLog) -> Result<Receipt, Failure> {
        let spec: KafkaSpec = rendered_spec(&message)?;
        let timeout = delivery_timeout(spec.timeout_ms, message.deadline_ms)?;
        let producer = self.producer(ProducerKey {
            bootstrap_servers: spec.bootstrap_servers.clone(),
            acks: spec.acks,
            timeout_ms: spec.timeout_ms,
        })?;

        let value = serde_json::to_vec(&spec.value_template).expect("JSON serializes");
        let mut headers = OwnedHeaders::new_with_capacity(spec.headers.len() + 1)
            .insert(Header { key: EXECUTION_ID_HEADER, value: Some(message.execution_id.as_bytes()) });
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
            Ok(Ok(delivery)) => Ok(receipt(json!({ "partition": delivery.partition, "offset": delivery.offset }))),
            Ok(Err((error, _message))) => Err(kafka_failure(&error)),
        }
    }

    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, "BROKER_ERROR", Some("code"))
    }
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
