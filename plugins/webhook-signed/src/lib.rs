//! `webhook-signed`: HTTP delivery signed per the Standard Webhooks specification.
//!
//! Endpoint spec:
//!
//! ```json
//! { "url": "https://hooks.example.com/in", "secret": "{{secret.webhook_secret}}",
//!   "body_template": { ... }, "headers": { ... }, "timeout_ms": 5000 }
//! ```
//!
//! Each request carries `webhook-id` (the execution id: stable across retries),
//! `webhook-timestamp` (Unix seconds) and `webhook-signature: v1,<sig>`, where `<sig>` is the
//! base64 HMAC-SHA256, keyed by the base64-decoded part of the `whsec_…` secret, of
//! `{webhook-id}.{webhook-timestamp}.{body}`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::BTreeMap;
use taskexec_plugin_sdk::{export, fail, http, log, spec, Failure, Message, Receipt, Transport};

/// Other fields are ignored, as they were before the plugin was written on the SDK.
#[derive(Deserialize)]
struct Spec {
    url: String,
    /// `whsec_` and base64; best given as `{{secret.NAME}}`.
    secret: String,
    #[serde(default)]
    body_template: Value,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Read by the host, which bounds the call by it.
    #[allow(dead_code)]
    timeout_ms: Option<u32>,
}

struct WebhookSigned;

/// The signature of `{id}.{timestamp}.{body}` under a `whsec_` secret.
fn sign(secret: &str, id: &str, timestamp: u64, body: &[u8]) -> Result<String, String> {
    let key = secret.strip_prefix("whsec_").ok_or("`secret` must start with whsec_")?;
    let key = STANDARD.decode(key).map_err(|_| "`secret` after whsec_ must be base64".to_string())?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|e| e.to_string())?;
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    Ok(STANDARD.encode(mac.finalize().into_bytes()))
}

impl Transport for WebhookSigned {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Spec = spec::parse(&spec_json)?;
        if !spec::is_template(&spec.url) {
            http::check_url(&spec.url).map_err(|e| format!("`url`: {e}"))?;
        }
        if !spec::is_template(&spec.secret) && !spec.secret.starts_with("whsec_") {
            return Err("`secret`: must be a whsec_ secret, best given as {{secret.NAME}}".into());
        }
        match spec.timeout_ms {
            Some(1..=300_000) | None => Ok(()),
            Some(t) => Err(format!("`timeout_ms`: must be between 1 and 300000, got {t}")),
        }
    }

    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let spec: Spec = spec::for_delivery(&message)?;
        let body = if spec.body_template.is_null() { json!({}) } else { spec.body_template };
        let body = serde_json::to_vec(&body).expect("JSON serializes");
        let timestamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let signature = sign(&spec.secret, &message.execution_id, timestamp, &body).map_err(fail::invalid_spec)?;
        let mut request = http::post(&spec.url)
            .header("content-type", "application/json")
            .header("webhook-id", &message.execution_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", format!("v1,{signature}"))
            .body(body)
            .max_response_bytes(64 * 1024);
        for (name, value) in &spec.headers {
            request = request.header(name, value);
        }
        let answer = request.send()?;
        log::info(&format!("POST {} answered {}", spec.url, answer.status));
        let answer = answer.error_for_status()?;
        Ok(Receipt::json(&json!({"status_code": answer.status, "body": answer.text(), "signed": true})))
    }
}

export!(WebhookSigned);

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries.
    #[test]
    fn signs_like_the_reference() {
        let sig = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(sig, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
