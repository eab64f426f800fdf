//! Transports: how a rendered message leaves the service.
//!
//! Each transport module owns its endpoint `spec`: the typed shape, its defaults, and the
//! checks run at registration. [`normalize_spec`] is the one place that picks the module by
//! endpoint type, and what it returns (defaults filled in) is what the store keeps.

pub mod http;
pub mod kafka;
pub mod redis_stream;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::template;

/// The kinds of delivery target an endpoint can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EndpointType {
    Http,
    Kafka,
    RedisStream,
}

impl EndpointType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "HTTP",
            Self::Kafka => "KAFKA",
            Self::RedisStream => "REDIS_STREAM",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "HTTP" => Some(Self::Http),
            "KAFKA" => Some(Self::Kafka),
            "REDIS_STREAM" => Some(Self::RedisStream),
            _ => None,
        }
    }
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
    }
}

fn normalize<S: EndpointSpec>(spec: &Value) -> Result<Value, SpecError> {
    if !spec.is_object() {
        return Err(SpecError::new("spec", "must be an object"));
    }
    let parsed: S = serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "spec".to_owned() } else { format!("spec.{path}") };
        SpecError::new(field, e.into_inner().to_string())
    })?;
    parsed.validate().map_err(|e| SpecError::new(format!("spec.{}", e.field), e.message))?;
    Ok(serde_json::to_value(&parsed).expect("a spec that deserialized serializes"))
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
    (!template::is_template(value)).then_some(value)
}

/// The longest a delivery may take. The reclaimer treats an execution RUNNING for longer than
/// `TE_STUCK_EXECUTION_TIMEOUT_SEC` (default 300 s) as abandoned, so a timeout must stay below it.
pub const MAX_TIMEOUT_MS: u64 = 300_000;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        for t in [EndpointType::Http, EndpointType::Kafka, EndpointType::RedisStream] {
            assert_eq!(EndpointType::parse(t.as_str()), Some(t));
            assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
        }
        assert_eq!(EndpointType::parse("PLUGIN"), None);
    }
}
