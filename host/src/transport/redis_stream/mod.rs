//! The Redis Streams transport: `XADD` through one auto-reconnecting connection manager per
//! Redis URL, shared by every delivery to that server.

mod spec;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use async_trait::async_trait;
use redis::aio::ConnectionManager;
use serde_json::{json, Value};

pub use spec::{MaxLen, RedisStreamSpec};

use super::{
    delivery_timeout, error_json, normalize_spec, receipt, rendered_spec, DeliveryLog, EndpointType, SpecError,
    Transport,
};
use crate::contract::{Failure, Message, Receipt};

/// The field every entry carries: consumers deduplicate retries on it.
pub const EXECUTION_ID_FIELD: &str = "te_execution_id";

#[derive(Default)]
pub struct RedisStreamTransport {
    // A tokio Mutex: connecting happens while holding it, so two first deliveries to one URL
    // share one connection instead of racing to make two.
    managers: tokio::sync::Mutex<HashMap<String, ConnectionManager>>,
}

impl RedisStreamTransport {
    pub fn new() -> Self {
        Self::default()
    }

    async fn connection(&self, url: &str, timeout: std::time::Duration) -> Result<ConnectionManager, Failure> {
        let mut managers = self.managers.lock().await;
        if let Some(manager) = managers.get(url) {
            return Ok(manager.clone());
        }
        // The URL may hold a password: errors describe it, never quote it.
        let client = redis::Client::open(url)
            .map_err(|e| Failure::invalid_spec(format!("the rendered redis_url is not valid: {:?}", e.kind())))?;
        let manager = tokio::time::timeout(timeout, ConnectionManager::new(client))
            .await
            .map_err(|_| Failure::timeout("no connection to Redis before the timeout"))?
            .map_err(|e| redis_failure(&e))?;
        managers.insert(url.to_owned(), manager.clone());
        Ok(manager)
    }
}

/// A stream field value: strings as they are, anything else as JSON text.
fn field_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[async_trait]
impl Transport for RedisStreamTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        normalize_spec(EndpointType::RedisStream, spec)
    }

    async fn deliver(&self, message: Message, _log: &DeliveryLog) -> Result<Receipt, Failure> {
        let spec: RedisStreamSpec = rendered_spec(&message)?;
        let timeout = delivery_timeout(spec.timeout_ms, message.deadline_ms)?;
        let max_len = match &spec.max_len {
            None => None,
            Some(MaxLen::Fixed(n)) => Some(*n),
            // A template rendered to text (a config value stored as a string, say).
            Some(MaxLen::Template(text)) => Some(
                text.trim()
                    .parse::<u64>()
                    .map_err(|_| Failure::invalid_spec(format!("max_len rendered to `{text}`, not a whole number")))?,
            ),
        };

        let mut command = redis::cmd("XADD");
        command.arg(&spec.stream);
        if let Some(n) = max_len {
            command.arg("MAXLEN");
            if spec.approximate_trimming {
                command.arg("~");
            }
            command.arg(n);
        }
        command.arg("*").arg(EXECUTION_ID_FIELD).arg(&message.execution_id);
        for (field, value) in &spec.fields_template {
            command.arg(field).arg(field_value(value));
        }

        let mut connection = self.connection(&spec.redis_url, timeout).await?;
        let message_id: String = tokio::time::timeout(timeout, command.query_async(&mut connection))
            .await
            .map_err(|_| Failure::timeout(format!("Redis did not answer XADD within {} ms", timeout.as_millis())))?
            .map_err(|e| redis_failure(&e))?;
        Ok(receipt(json!({ "message_id": message_id, "stream": spec.stream })))
    }

    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, "STREAM_ERROR", None)
    }
}

/// Server errors that clear up by themselves; any other server error (WRONGTYPE, a bad
/// argument) will fail the same way again.
const TRANSIENT_SERVER_ERRORS: [&str; 6] = ["LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY"];

fn redis_failure(error: &redis::RedisError) -> Failure {
    let message = format!("Redis: {error}");
    if error.is_timeout() {
        Failure::timeout(message)
    } else if error.is_io_error() || error.is_connection_refusal() || error.is_connection_dropped() {
        Failure::connection(message)
    } else {
        let retryable = error.code().is_some_and(|code| TRANSIENT_SERVER_ERRORS.contains(&code));
        Failure::rejected(None, retryable, message)
    }
}
