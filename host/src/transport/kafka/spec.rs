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

/// How the producer talks to the brokers (librdkafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SecurityProtocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plaintext => "plaintext",
            Self::Ssl => "ssl",
            Self::SaslPlaintext => "sasl_plaintext",
            Self::SaslSsl => "sasl_ssl",
        }
    }

    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SaslMechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// SASL credentials; `password` is usually `{{secret.…}}`, rendered at delivery.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sasl {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

/// Never shows the password: producers' settings may be logged.
impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .finish()
    }
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
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// Required with `SASL_PLAINTEXT` and `SASL_SSL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl: Option<Sasl>,
    /// With `SSL` and `SASL_SSL`: the PEM certificate of a private CA that signed the brokers'
    /// certificates; without it the system's trusted roots verify them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_ca_pem: Option<String>,
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
        match (&self.sasl, self.security_protocol.sasl()) {
            (None, true) => {
                return Err(SpecError::new(
                    "sasl",
                    "is required with SASL_PLAINTEXT and SASL_SSL: {\"mechanism\": \"SCRAM-SHA-512\", \"username\": …, \"password\": \"{{secret.…}}\"}",
                ))
            }
            (Some(_), false) => {
                return Err(SpecError::new("sasl", "applies only with security_protocol SASL_PLAINTEXT or SASL_SSL"))
            }
            (Some(sasl), true) => {
                check_non_empty("sasl.username", &sasl.username)?;
                check_non_empty("sasl.password", &sasl.password)?;
            }
            (None, false) => {}
        }
        if let Some(ca) = &self.ssl_ca_pem {
            if !self.security_protocol.tls() {
                return Err(SpecError::new("ssl_ca_pem", "applies only with security_protocol SSL or SASL_SSL"));
            }
            if literal(ca).is_some_and(|pem| !pem.contains("-----BEGIN CERTIFICATE-----")) {
                return Err(SpecError::new(
                    "ssl_ca_pem",
                    "must be a PEM certificate (-----BEGIN CERTIFICATE-----…), or a template such as {{config.kafka_ca}}",
                ));
            }
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
