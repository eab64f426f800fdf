//! The Kafka endpoint spec: its shape, defaults and registration checks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transport::{check_non_empty, check_timeout, literal, EndpointSpec, SpecError, MAX_TIMEOUT_MS};

/// How many broker acknowledgements a produce waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Acks {
    #[serde(rename = "0")]
    None,
    #[serde(rename = "1")]
    Leader,
    #[serde(rename = "all")]
    #[default]
    All,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSpec {
    pub bootstrap_servers: String,
    pub topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_template: Option<String>,
    pub value_template: Value,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub acks: Acks,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}

impl EndpointSpec for KafkaSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_non_empty("bootstrap_servers", &self.bootstrap_servers)?;
        check_non_empty("topic", &self.topic)?;
        if let Some(topic) = literal(&self.topic) {
            // Kafka's own rule for topic names.
            let legal = topic.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !legal || topic.len() > 249 || topic == "." || topic == ".." {
                return Err(SpecError::new(
                    "topic",
                    "Kafka topic names are 1-249 characters of a-z, A-Z, 0-9, '.', '_' and '-'",
                ));
            }
        }
        for name in self.headers.keys() {
            check_non_empty(&format!("headers.{name}"), name)?;
        }
        check_timeout("timeout_ms", self.timeout_ms, MAX_TIMEOUT_MS)
    }
}

#[cfg(test)]
mod tests {
    use crate::transport::{normalize_spec, EndpointType};
    use serde_json::json;

    #[test]
    fn defaults_and_rules() {
        let spec = normalize_spec(
            EndpointType::Kafka,
            &json!({"bootstrap_servers": "{{config.bootstrap_servers}}", "topic": "order.events.v1", "value_template": {"a": 1}}),
        )
        .unwrap();
        assert_eq!(spec["acks"], "all");
        assert_eq!(spec["timeout_ms"], 10_000);
        let err = normalize_spec(
            EndpointType::Kafka,
            &json!({"bootstrap_servers": "k:9092", "topic": "bad topic!", "value_template": {}}),
        )
        .unwrap_err();
        assert_eq!(err.field, "spec.topic");
        let err = normalize_spec(
            EndpointType::Kafka,
            &json!({"bootstrap_servers": "k:9092", "topic": "t", "value_template": {}, "acks": "2"}),
        )
        .unwrap_err();
        assert_eq!(err.field, "spec.acks");
    }
}
