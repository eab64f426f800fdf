//! The Redis Streams transport: `XADD` through one auto-reconnecting connection manager per
//! Redis URL, shared by every delivery to that server and kept in a bounded cache
//! ([`ClientCache`]). The server's name is resolved and checked against the egress policy by
//! us, and the manager connects (and reconnects) to the address that was checked.

mod spec;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ConnectionAddr, IntoConnectionInfo};
use serde_json::{json, Value};

pub use spec::{MaxLen, RedisStreamSpec};

use super::clients::ClientCache;
use super::{
    cannot_reach, delivery_timeout, egress_refused, error_json, normalize_spec, receipt, rendered_spec, Delivery,
    EndpointType, SpecError, Transport,
};
use crate::contract::{Failure, Message, Receipt};
use crate::domain::AttemptErrorType;
use crate::egress::{self, EgressPolicy};
use crate::trace::TRACEPARENT;

/// The field every entry carries: consumers deduplicate retries on it.
pub const EXECUTION_ID_FIELD: &str = "te_execution_id";

pub struct RedisStreamTransport {
    managers: ClientCache<String, ConnectionManager>,
    policy: Arc<EgressPolicy>,
}

impl Default for RedisStreamTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl RedisStreamTransport {
    /// Under the default egress policy.
    pub fn new() -> Self {
        Self::with_policy(Arc::default())
    }

    /// Every connection held to `policy`, checked on the address connected to.
    pub fn with_policy(policy: Arc<EgressPolicy>) -> Self {
        Self { managers: ClientCache::default(), policy }
    }

    /// The manager for `url` (and, for `rediss://`, the private CA `tls_ca_pem`, which is
    /// part of the cache key: another CA is another client).
    async fn connection(
        &self,
        url: &str,
        tls_ca_pem: Option<&str>,
        timeout: Duration,
    ) -> Result<ConnectionManager, Failure> {
        // Borrowed for the usual lookup, so a delivery to a known server allocates no key.
        let key: std::borrow::Cow<'_, str> = match tls_ca_pem {
            None => url.into(),
            Some(ca) => format!("{url}\n{ca}").into(),
        };
        if let Some(manager) = self.managers.get(key.as_ref()).await {
            return Ok(manager);
        }
        let connect = async {
            // The URL may hold a password: errors describe it, never quote it.
            let info = url
                .into_connection_info()
                .map_err(|e| Failure::invalid_spec(format!("the rendered redis_url is not valid: {:?}", e.kind())))?;
            let info = self.checked_address(info).await?;
            let client = match tls_ca_pem {
                None => redis::Client::open(info),
                Some(ca) => {
                    if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
                        return Err(Failure::invalid_spec("tls_ca_pem applies only to a rediss:// (TLS) redis_url"));
                    }
                    let certificates =
                        redis::TlsCertificates { client_tls: None, root_cert: Some(ca.as_bytes().to_vec()) };
                    redis::Client::build_with_tls(info, certificates)
                }
            }
            // The kind and detail only: the error of a URL with a password may quote it.
            .map_err(|e| {
                let detail = e.detail().map(|d| format!(": {d}")).unwrap_or_default();
                Failure::invalid_spec(format!("the rendered redis_url cannot be used: {:?}{detail}", e.kind()))
            })?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout))
                .set_number_of_retries(1);
            ConnectionManager::new_with_config(client, config).await.map_err(|e| redis_failure(&e))
        };
        tokio::time::timeout(timeout, self.managers.get_or_connect(key.into_owned(), connect))
            .await
            .map_err(|_| Failure::timeout("no connection to Redis before the timeout"))?
    }

    /// `info` with its host replaced by an address the egress policy allows, so the
    /// connection (and every reconnection) goes where the check looked.
    async fn checked_address(&self, info: redis::ConnectionInfo) -> Result<redis::ConnectionInfo, Failure> {
        let refused = |e| cannot_reach("Redis", e);
        match info.addr().clone() {
            ConnectionAddr::Tcp(host, port) => {
                let allowed = egress::resolve_allowed(&self.policy, &host, port).await.map_err(refused)?;
                let first = allowed.first().ok_or_else(|| Failure::connection(format!("{host} has no address")))?;
                Ok(info.set_addr(ConnectionAddr::Tcp(first.ip().to_string(), port)))
            }
            // A TLS connection is made to the name (its certificate is checked against it):
            // the name is checked here, and resolved again by the client.
            ConnectionAddr::TcpTls { host, port, .. } => {
                egress::resolve_allowed(&self.policy, &host, port).await.map_err(refused)?;
                Ok(info)
            }
            ConnectionAddr::Unix(_) => {
                egress::check_local_socket(&self.policy).map_err(|denied| egress_refused(&denied))?;
                Ok(info)
            }
            _ => {
                Err(Failure::invalid_spec("the rendered redis_url names a kind of connection this server cannot make"))
            }
        }
    }
}

/// A stream field value: strings as they are, anything else as JSON text.
pub(crate) fn field_value(value: &Value) -> String {
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

    async fn deliver(&self, message: Message, delivery: &Delivery) -> Result<Receipt, Failure> {
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
        if let Some(traceparent) = &delivery.traceparent {
            if !spec.fields_template.contains_key(TRACEPARENT) {
                command.arg(TRACEPARENT).arg(traceparent.as_str());
            }
        }
        for (field, value) in &spec.fields_template {
            command.arg(field).arg(field_value(value));
        }

        let mut connection = self.connection(&spec.redis_url, spec.tls_ca_pem.as_deref(), timeout).await?;
        let message_id: String = tokio::time::timeout(timeout, command.query_async(&mut connection))
            .await
            .map_err(|_| Failure::timeout(format!("Redis did not answer XADD within {} ms", timeout.as_millis())))?
            .map_err(|e| redis_failure(&e))?;
        Ok(receipt(json!({ "message_id": message_id, "stream": spec.stream })))
    }

    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, AttemptErrorType::StreamError, None)
    }

    async fn destinations(&self, spec: &Value) -> super::Destinations {
        super::url_destination(spec, "redis_url")
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
