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

wit_bindgen::generate!({
    path: "../../transports-wit/wit",
    world: "transport-plugin",
    generate_all,
});

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use exports::taskexec::plugin::transport::Guest;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use taskexec::plugin::host::log;
use taskexec::plugin::types::{Failure, FailureKind, LogLevel, Message, Receipt};
use wasi::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

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

fn failure(kind: FailureKind, retryable: bool, message: impl Into<String>) -> Failure {
    Failure { kind, retryable, message: message.into(), retry_after_ms: None }
}

/// `scheme://authority/path?query`, split for wasi:http.
fn split_url(url: &str) -> Result<(Scheme, String, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or("`url` must be an absolute http(s) URL")?;
    let scheme = match scheme {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => return Err(format!("`url` scheme must be http or https, not {other}")),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err("`url` has no host".into());
    }
    Ok((scheme, authority.to_string(), path.to_string()))
}

fn spec_str<'a>(spec: &'a Value, field: &str) -> Result<&'a str, String> {
    spec.get(field).and_then(Value::as_str).ok_or_else(|| format!("`{field}` is required and must be a string"))
}

impl Guest for WebhookSigned {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Value = serde_json::from_str(&spec_json).map_err(|e| format!("the spec is not JSON: {e}"))?;
        let url = spec_str(&spec, "url")?;
        if !url.contains("{{") {
            split_url(url)?;
        }
        let secret = spec_str(&spec, "secret")?;
        if !secret.contains("{{") && !secret.starts_with("whsec_") {
            return Err("`secret` must be a whsec_ secret, best given as {{secret.NAME}}".into());
        }
        if let Some(t) = spec.get("timeout_ms") {
            match t.as_u64() {
                Some(1..=300_000) => {}
                _ => return Err("`timeout_ms` must be between 1 and 300000".into()),
            }
        }
        if let Some(h) = spec.get("headers") {
            if !h.as_object().is_some_and(|m| m.values().all(Value::is_string)) {
                return Err("`headers` must map names to strings".into());
            }
        }
        Ok(())
    }

    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let invalid = |m: String| failure(FailureKind::InvalidSpec, false, m);
        let spec: Value = serde_json::from_str(&message.spec_json).map_err(|e| invalid(e.to_string()))?;
        let url = spec_str(&spec, "url").map_err(invalid)?;
        let secret = spec_str(&spec, "secret").map_err(invalid)?;
        let (scheme, authority, path) = split_url(url).map_err(invalid)?;
        let body = serde_json::to_vec(spec.get("body_template").unwrap_or(&json!({}))).unwrap();
        let timestamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let signature = sign(secret, &message.execution_id, timestamp, &body).map_err(invalid)?;

        let mut headers: Vec<(String, Vec<u8>)> = vec![
            ("content-type".into(), b"application/json".to_vec()),
            ("webhook-id".into(), message.execution_id.clone().into_bytes()),
            ("webhook-timestamp".into(), timestamp.to_string().into_bytes()),
            ("webhook-signature".into(), format!("v1,{signature}").into_bytes()),
        ];
        if let Some(extra) = spec.get("headers").and_then(Value::as_object) {
            for (name, value) in extra {
                headers.push((name.to_lowercase(), value.as_str().unwrap_or_default().as_bytes().to_vec()));
            }
        }
        let fields = Fields::from_list(&headers).map_err(|e| invalid(format!("a header cannot be sent: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        request.set_method(&Method::Post).map_err(|_| invalid("method".into()))?;
        request.set_scheme(Some(&scheme)).map_err(|_| invalid("scheme".into()))?;
        request.set_authority(Some(&authority)).map_err(|_| invalid("authority".into()))?;
        request.set_path_with_query(Some(&path)).map_err(|_| invalid("path".into()))?;

        // The whole body is written and finished before `handle`: the host then sends the
        // request at once on this call's own task (a body still being written after `handle`
        // is sent from a task of its own, one hand-off more each way).
        let outgoing = request.body().map_err(|_| failure(FailureKind::Internal, false, "no request body"))?;
        {
            let stream = outgoing.write().map_err(|_| failure(FailureKind::Internal, true, "no body stream"))?;
            let mut rest = &body[..];
            while !rest.is_empty() {
                let permitted = stream
                    .check_write()
                    .map_err(|e| failure(FailureKind::Connection, true, format!("writing the body failed: {e:?}")))?;
                if permitted == 0 {
                    return Err(failure(FailureKind::InvalidSpec, false, "the body is too large to send"));
                }
                let (chunk, remaining) = rest.split_at(rest.len().min(permitted as usize));
                stream
                    .write(chunk)
                    .map_err(|e| failure(FailureKind::Connection, true, format!("writing the body failed: {e:?}")))?;
                rest = remaining;
            }
        }
        OutgoingBody::finish(outgoing, None).map_err(|e| failure(FailureKind::Connection, true, format!("{e:?}")))?;
        // No request options: the host bounds every request by the call's deadline, which is
        // the endpoint's `timeout_ms`.
        let pending = wasi::http::outgoing_handler::handle(request, None)
            .map_err(|e| failure(FailureKind::Connection, true, format!("the request was refused: {e:?}")))?;
        // The host answers a request with a finished body before `handle` returns, so the
        // response is usually there already: wait only when it is not.
        let answer = match pending.get() {
            Some(answer) => Some(answer),
            None => {
                pending.subscribe().block();
                pending.get()
            }
        };
        let response = match answer {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => {
                let text = format!("{code:?}");
                let kind = if text.contains("Timeout") { FailureKind::Timeout } else { FailureKind::Connection };
                return Err(failure(kind, true, format!("HTTP request failed: {text}")));
            }
            _ => return Err(failure(FailureKind::Internal, true, "the response never arrived")),
        };
        let status = response.status();
        let mut received = Vec::new();
        if let Ok(incoming) = response.consume() {
            if let Ok(stream) = incoming.stream() {
                while received.len() < 64 * 1024 {
                    match stream.blocking_read(4096) {
                        Ok(chunk) if !chunk.is_empty() => received.extend_from_slice(&chunk),
                        _ => break,
                    }
                }
            }
        }
        let text = String::from_utf8_lossy(&received).into_owned();
        log(LogLevel::Info, &format!("POST {authority}{path} answered {status}"));
        if (200..300).contains(&status) {
            Ok(Receipt { output_json: json!({"status_code": status, "body": text, "signed": true}).to_string() })
        } else {
            let retryable = status == 408 || status == 429 || status >= 500;
            Err(failure(
                FailureKind::Rejected(Some(status)),
                retryable,
                format!("HTTP {status}: {}", text.chars().take(512).collect::<String>()),
            ))
        }
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
