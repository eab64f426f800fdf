//! The Redis Streams endpoint spec: its shape, defaults and registration checks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::transport::{check_non_empty, check_timeout, literal, EndpointSpec, SpecError, MAX_TIMEOUT_MS};

/// `MAXLEN` for trimming: a number, or a template that renders to one (`{{config.max_len}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MaxLen {
    Fixed(u64),
    Template(String),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisStreamSpec {
    pub redis_url: String,
    pub stream: String,
    pub fields_template: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_len: Option<MaxLen>,
    #[serde(default = "default_true")]
    pub approximate_trimming: bool,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// For a `rediss://` server whose certificate a private CA signed: that CA's certificate
    /// (PEM). Usually a template naming a config or secret (`{{config.redis_ca}}`). Without
    /// it the system's trusted roots verify the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca_pem: Option<String>,
}

fn default_true() -> bool {
    true
}

fn default_timeout_ms() -> u64 {
    3_000
}

impl EndpointSpec for RedisStreamSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_non_empty("redis_url", &self.redis_url)?;
        if let Some(url) = literal(&self.redis_url) {
            let scheme = url.split("://").next().unwrap_or_default();
            if !url.contains("://") || !matches!(scheme, "redis" | "rediss" | "redis+unix" | "unix") {
                return Err(SpecError::new("redis_url", "must be a redis://, rediss:// or unix:// URL"));
            }
        }
        if let Some(ca) = &self.tls_ca_pem {
            if literal(&self.redis_url).is_some_and(|url| !url.starts_with("rediss://")) {
                return Err(SpecError::new("tls_ca_pem", "applies only to a rediss:// (TLS) redis_url"));
            }
            if literal(ca).is_some_and(|pem| !pem.contains("-----BEGIN CERTIFICATE-----")) {
                return Err(SpecError::new(
                    "tls_ca_pem",
                    "must be a PEM certificate (-----BEGIN CERTIFICATE-----…), or a template such as {{config.redis_ca}}",
                ));
            }
        }
        check_non_empty("stream", &self.stream)?;
        if self.fields_template.is_empty() {
            return Err(SpecError::new("fields_template", "must have at least one field (XADD needs one)"));
        }
        match &self.max_len {
            Some(MaxLen::Fixed(0)) => return Err(SpecError::new("max_len", "must be at least 1")),
            Some(MaxLen::Template(t)) if literal(t).is_some() => {
                return Err(SpecError::new("max_len", "must be a number, or a template such as {{config.max_len}}"))
            }
            _ => {}
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
        let base =
            json!({"redis_url": "redis://127.0.0.1:6379", "stream": "s", "fields_template": {"a": "{{input.a}}"}});
        let spec = normalize_spec(EndpointType::RedisStream, &base).unwrap();
        assert_eq!(spec["approximate_trimming"], true);
        assert_eq!(spec["timeout_ms"], 3_000);
        let with = |k: &str, v: serde_json::Value| {
            let mut s = base.clone();
            s[k] = v;
            normalize_spec(EndpointType::RedisStream, &s)
        };
        assert!(with("max_len", json!("{{config.max_stream_length}}")).is_ok());
        assert!(with("max_len", json!(1000)).is_ok());
        assert_eq!(with("max_len", json!("ten")).unwrap_err().field, "spec.max_len");
        assert_eq!(with("max_len", json!(0)).unwrap_err().field, "spec.max_len");
        assert_eq!(with("fields_template", json!({})).unwrap_err().field, "spec.fields_template");
        assert_eq!(with("redis_url", json!("http://x")).unwrap_err().field, "spec.redis_url");
        assert_eq!(with("timeout_ms", json!(0)).unwrap_err().field, "spec.timeout_ms");
    }
}
