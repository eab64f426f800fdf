//! The HTTP endpoint spec: its shape, defaults and registration checks.

use std::collections::BTreeMap;

use axum::http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transport::{check_non_empty, check_timeout, literal, EndpointSpec, SpecError, MAX_TIMEOUT_MS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpMethod {
    GET,
    POST,
    PUT,
    PATCH,
    DELETE,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    /// May use `{{config.*}}`, `{{secret.*}}` and `{{input.*}}`.
    pub url: String,
    pub method: HttpMethod,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Any JSON; strings in it are templates. Absent means no body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_template: Option<Value>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_expected_status_codes")]
    pub expected_status_codes: Vec<u16>,
    /// Standard Webhooks signatures on every attempt (`super::signing`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing: Option<super::signing::Signing>,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn default_expected_status_codes() -> Vec<u16> {
    vec![200, 201, 202, 204]
}

impl EndpointSpec for HttpSpec {
    fn validate(&self) -> Result<(), SpecError> {
        check_non_empty("url", &self.url)?;
        if let Some(url) = literal(&self.url) {
            let parsed = url::Url::parse(url).map_err(|e| SpecError::new("url", format!("not a valid URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(SpecError::new("url", format!("scheme must be http or https, got {}", parsed.scheme())));
            }
        }
        for (name, value) in &self.headers {
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SpecError::new(format!("headers.{name}"), "not a valid HTTP header name"))?;
            if let Some(value) = literal(value) {
                HeaderValue::from_str(value)
                    .map_err(|_| SpecError::new(format!("headers.{name}"), "not a valid HTTP header value"))?;
            }
        }
        check_timeout("timeout_ms", self.timeout_ms, MAX_TIMEOUT_MS)?;
        if self.expected_status_codes.is_empty() {
            return Err(SpecError::new("expected_status_codes", "must list at least one status code"));
        }
        if let Some(code) = self.expected_status_codes.iter().find(|c| !(100..=599).contains(*c)) {
            return Err(SpecError::new(
                "expected_status_codes",
                format!("{code} is not an HTTP status code (100-599)"),
            ));
        }
        if let Some(signing) = &self.signing {
            signing.validate()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::transport::{normalize_spec, EndpointType};
    use serde_json::json;

    fn check(spec: serde_json::Value) -> Result<serde_json::Value, (String, String)> {
        normalize_spec(EndpointType::Http, &spec).map_err(|e| (e.field, e.message))
    }

    #[test]
    fn defaults_are_filled_in() {
        let spec = check(json!({"url": "https://api.example.com/x", "method": "POST"})).unwrap();
        assert_eq!(spec["timeout_ms"], 10_000);
        assert_eq!(spec["expected_status_codes"], json!([200, 201, 202, 204]));
        assert_eq!(spec["headers"], json!({}));
    }

    #[test]
    fn each_rule_names_its_field() {
        let base = |extra: serde_json::Value| {
            let mut spec = json!({"url": "https://x.example/", "method": "POST"});
            spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            check(spec).unwrap_err().0
        };
        assert_eq!(base(json!({"timeout_ms": 0})), "spec.timeout_ms");
        assert_eq!(base(json!({"timeout_ms": -5})), "spec.timeout_ms");
        assert_eq!(base(json!({"expected_status_codes": [200, 600]})), "spec.expected_status_codes");
        assert_eq!(base(json!({"expected_status_codes": []})), "spec.expected_status_codes");
        assert_eq!(base(json!({"url": "ftp://x"})), "spec.url");
        assert_eq!(base(json!({"url": " "})), "spec.url");
        assert_eq!(base(json!({"headers": {"bad header": "x"}})), "spec.headers.bad header");
        assert_eq!(base(json!({"method": "TRACE"})), "spec.method");
        assert_eq!(base(json!({"bogus": 1})), "spec.bogus");
    }

    #[test]
    fn templated_url_is_checked_after_rendering_not_now() {
        assert!(check(json!({"url": "{{config.base}}/emails", "method": "GET"})).is_ok());
    }
}
