//! `json-status`: a classifier for receivers that answer `200 OK` with the real outcome in a
//! JSON body — `{"ok": false, "error": "rate limited", "retry_in_ms": 5000}`, say. It reads one
//! field of a 2xx body and decides success, retry (after a delay the body or a header gives),
//! permanent failure, or opening the endpoint's circuit. Any other answer keeps the
//! transport's verdict.
//!
//! Config (every key optional):
//! - `field`: JSON pointer to the outcome (default `/ok`);
//! - `success`, `permanent`, `open_circuit`: the values of that field meaning each (default
//!   `success: [true, "ok"]`); any other value means retry;
//! - `message`: JSON pointer to a text for the attempt's error (default `/error`);
//! - `retry_after_field`: JSON pointer to a delay in milliseconds (default `/retry_in_ms`);
//! - `retry_after_header`: a header holding a delay in seconds (`x-retry-in`, say);
//! - `cooldown_ms`: how long an `open_circuit` value opens the circuit.

use taskexec_plugin_sdk::classifier::{export, Answer, Classifier, OpenCircuit, Retry, Verdict};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    field: String,
    success: Vec<Value>,
    permanent: Vec<Value>,
    open_circuit: Vec<Value>,
    message: String,
    retry_after_field: String,
    retry_after_header: Option<String>,
    cooldown_ms: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            field: "/ok".into(),
            success: vec![json!(true), json!("ok")],
            permanent: Vec::new(),
            open_circuit: Vec::new(),
            message: "/error".into(),
            retry_after_field: "/retry_in_ms".into(),
            retry_after_header: None,
            cooldown_ms: None,
        }
    }
}

pub fn parse_config(text: &str) -> Result<Config, String> {
    let config: Config = serde_json::from_str(text).map_err(|e| format!("config: {e}"))?;
    for (name, pointer) in [("field", &config.field), ("message", &config.message)] {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!("config.{name}: `{pointer}` is not a JSON pointer (it starts with `/`)"));
        }
    }
    Ok(config)
}

/// The verdict on a receiver's answer: (status, headers, body).
pub fn judge(config: &Config, status: Option<u16>, headers: &[(String, String)], body: &[u8]) -> Verdict {
    let Some(200..=299) = status else { return Verdict::Keep };
    let Ok(document) = serde_json::from_slice::<Value>(body) else { return Verdict::Keep };
    let Some(outcome) = document.pointer(&config.field) else { return Verdict::Keep };
    if config.success.contains(outcome) {
        return Verdict::Success;
    }
    let message = match document.pointer(&config.message) {
        Some(Value::String(text)) => format!("{} is {outcome}: {text}", config.field),
        _ => format!("{} is {outcome}", config.field),
    };
    if config.permanent.contains(outcome) {
        return Verdict::Permanent(message);
    }
    if config.open_circuit.contains(outcome) {
        return Verdict::OpenCircuit(OpenCircuit { message, cooldown_ms: config.cooldown_ms });
    }
    let from_header = config.retry_after_header.as_ref().and_then(|name| {
        let (_, value) = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        value.trim().parse::<u64>().ok().map(|seconds| seconds.saturating_mul(1000))
    });
    let after_ms = from_header.or_else(|| document.pointer(&config.retry_after_field)?.as_u64());
    Verdict::Retry(Retry { message, after_ms })
}

struct JsonStatus;

impl Classifier for JsonStatus {
    fn check(config_json: String) -> Result<(), String> {
        parse_config(&config_json).map(drop)
    }

    fn classify(answer: Answer) -> Verdict {
        match parse_config(&answer.config_json) {
            Ok(config) => judge(&config, answer.status, &answer.headers, &answer.body),
            // Checked at registration; a config that stopped parsing keeps the transport's word.
            Err(_) => Verdict::Keep,
        }
    }
}

export!(JsonStatus);

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(config: &str, status: u16, body: &str) -> Verdict {
        judge(&parse_config(config).unwrap(), Some(status), &[("x-retry-in".into(), "7".into())], body.as_bytes())
    }

    #[test]
    fn a_2xx_body_decides_and_anything_else_keeps_the_transports_verdict() {
        assert_eq!(verdict("{}", 200, r#"{"ok": true}"#), Verdict::Success);
        assert_eq!(
            verdict("{}", 200, r#"{"ok": false, "error": "busy", "retry_in_ms": 250}"#),
            Verdict::Retry(Retry { message: "/ok is false: busy".into(), after_ms: Some(250) })
        );
        assert_eq!(verdict("{}", 503, r#"{"ok": false}"#), Verdict::Keep);
        assert_eq!(verdict("{}", 200, "not json"), Verdict::Keep);
        assert_eq!(verdict("{}", 200, r#"{"other": 1}"#), Verdict::Keep);
    }

    #[test]
    fn configured_values_mean_permanent_or_open_circuit_and_a_header_gives_the_delay() {
        let config = r#"{"field": "/status", "success": ["done"], "permanent": ["invalid"],
                         "open_circuit": ["overloaded"], "cooldown_ms": 5000, "retry_after_header": "X-Retry-In"}"#;
        assert_eq!(verdict(config, 200, r#"{"status": "done"}"#), Verdict::Success);
        assert_eq!(
            verdict(config, 200, r#"{"status": "invalid"}"#),
            Verdict::Permanent("/status is \"invalid\"".into())
        );
        assert_eq!(
            verdict(config, 200, r#"{"status": "overloaded"}"#),
            Verdict::OpenCircuit(OpenCircuit { message: "/status is \"overloaded\"".into(), cooldown_ms: Some(5000) })
        );
        assert_eq!(
            verdict(config, 200, r#"{"status": "later"}"#),
            Verdict::Retry(Retry { message: "/status is \"later\"".into(), after_ms: Some(7000) })
        );
    }

    #[test]
    fn a_bad_config_names_the_field() {
        assert!(parse_config(r#"{"feild": "/ok"}"#).unwrap_err().contains("feild"));
        assert!(parse_config(r#"{"field": "ok"}"#).unwrap_err().contains("config.field"));
    }
}
