//! `ntfy`: push notifications to an ntfy-style server: `POST {server}/{topic}`, the message as
//! the body, title, priority and tags as headers. Spec: `{"server": "https://ntfy.sh", "topic":
//! "alerts", "message": "{{input.text}}", "title": "…", "priority": 4, "tags": ["warning"],
//! "token": "{{secret.ntfy_token}}"}`.
use serde::Deserialize;
use taskexec_plugin_sdk::{export, fail, http, log, spec, Failure, Message, Receipt, Transport};
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    server: String,
    topic: String,
    message: String,
    title: Option<String>,
    priority: Option<u8>,
    #[serde(default)]
    tags: Vec<String>,
    token: Option<String>,
}

struct Ntfy;
impl Transport for Ntfy {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Spec = spec::parse(&spec_json)?;
        if !spec::is_template(&spec.server) {
            http::check_url(&spec.server).map_err(|e| format!("`server`: {e}"))?;
        }
        match spec.priority {
            Some(1..=5) | None => Ok(()),
            Some(p) => Err(format!("`priority`: must be 1 (min) to 5 (max), got {p}")),
        }
    }

    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let spec: Spec = spec::for_delivery(&message)?;
        if spec.topic.is_empty() || spec.topic.contains('/') {
            return Err(fail::invalid_spec("`topic`: must be one non-empty path segment"));
        }
        let mut request = http::post(&format!("{}/{}", spec.server.trim_end_matches('/'), spec.topic))
            .header("x-message-id", &message.idempotency_key)
            .body(spec.message);
        if let Some(title) = &spec.title {
            request = request.header("title", title);
        }
        if let Some(priority) = spec.priority.map(|p| p.to_string()) {
            request = request.header("priority", priority);
        }
        if !spec.tags.is_empty() {
            request = request.header("tags", spec.tags.join(","));
        }
        if let Some(token) = &spec.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let answer = request.send()?;
        log::info(&format!("{} answered {}", spec.server, answer.status));
        answer.receipt()
    }
}

export!(Ntfy);
