//! The HTTP transport: one shared HTTP/1.1 client (a keep-alive pool per receiver, `h1`) sends
//! each message as a request and judges the response by the endpoint's expected status codes.

pub(crate) mod client;
mod h1;
pub mod signing;
mod spec;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use async_trait::async_trait;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, StatusCode};
use serde_json::{json, Value};

pub use spec::{HttpMethod, HttpSpec};

use super::{
    delivery_timeout, egress_refused, error_json, normalize_spec, receipt, rendered_spec, Delivery, EndpointType,
    ReceiverAnswer, SpecError, Transport,
};
use crate::contract::{Failure, Message, Receipt};
use crate::domain::AttemptErrorType;
use crate::egress::{self, EgressPolicy, PolicyResolver};
use crate::trace::TRACEPARENT;
/// For the fuzz target under `fuzz/`: the HTTP/1.1 client's reading of an answer from bytes.
#[doc(hidden)]
pub use h1::{read_answer_bytes, Answer};
use h1::{H1Client, Outgoing, SendError};

/// Bytes of a response body kept in the execution's output; the rest is cut (and the output
/// says so with `"body_truncated": true`). Outputs are stored per attempt, so they stay small.
pub const OUTPUT_BODY_LIMIT: usize = 64 * 1024;
/// Bytes of a refused response's body quoted in the failure message.
const ERROR_BODY_LIMIT: usize = 1024;

pub struct HttpTransport {
    client: H1Client,
    policy: Arc<EgressPolicy>,
}

impl Default for HttpTransport {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpTransport {
    /// Under the default egress policy.
    pub fn new() -> Self {
        Self::with_policy(Arc::default())
    }

    /// Every connection held to `policy`, checked on the address connected to.
    pub fn with_policy(policy: Arc<EgressPolicy>) -> Self {
        Self { client: H1Client::new(PolicyResolver { policy: policy.clone() }), policy }
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn validate(&self, spec: &Value) -> Result<Value, SpecError> {
        normalize_spec(EndpointType::Http, spec)
    }

    async fn deliver(&self, message: Message, delivery: &Delivery) -> Result<Receipt, Failure> {
        let PreparedRequest { outgoing, timeout, expected_status_codes } = self.prepare(&message, delivery)?;
        // Its rendered spec and ids are in the request now: not kept while the receiver answers.
        drop(message);
        let answer = self.client.send(outgoing, timeout, OUTPUT_BODY_LIMIT).await.map_err(transport_failure)?;
        let (status, body, truncated) = (answer.response.status, answer.body, answer.truncated);
        let retry_after_ms = retry_after_ms(status, &answer.response.headers);
        // Copied only for a classifier: it costs every delivery that has none.
        if delivery.wants_answer() {
            let headers = answer.response.headers.iter().take(ReceiverAnswer::MAX_HEADERS);
            let headers = headers
                .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
                .collect();
            delivery.keep_answer(ReceiverAnswer { status: Some(status.as_u16()), headers, body: body.clone() });
        }
        let body_text = String::from_utf8_lossy(&body);

        if expected_status_codes.contains(&status.as_u16()) {
            let mut output = json!({ "status_code": status.as_u16(), "body": body_text });
            if truncated {
                output["body_truncated"] = json!(true);
            }
            return Ok(receipt(output));
        }
        let quoted: String = body_text.chars().take(ERROR_BODY_LIMIT).collect();
        let message =
            if quoted.trim().is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {quoted}") };
        Err(Failure::rejected(Some(status.as_u16()), is_retryable(status), message).with_retry_after_ms(retry_after_ms))
    }

    fn error_json(&self, failure: &Failure) -> Value {
        error_json(failure, AttemptErrorType::HttpError, Some("status_code"))
    }

    /// No redirect is followed, so the URL's host is the only one a delivery reaches.
    async fn destinations(&self, spec: &Value) -> super::Destinations {
        super::url_destination(spec, "url")
    }
}

/// A delivery's request, and what judging its answer needs.
struct PreparedRequest {
    outgoing: Outgoing,
    timeout: std::time::Duration,
    expected_status_codes: Vec<u16>,
}

impl HttpTransport {
    /// The request for `message`'s rendered spec, built before anything is awaited: the parsed
    /// spec (headers, body template) is then not part of the future held while the receiver
    /// answers (a local's storage lasts to the end of its scope, `drop` or not).
    fn prepare(&self, message: &Message, delivery: &Delivery) -> Result<PreparedRequest, Failure> {
        let spec: HttpSpec = rendered_spec(message)?;
        let timeout = delivery_timeout(spec.timeout_ms, message.deadline_ms)?;
        let url = url::Url::parse(&spec.url)
            .map_err(|e| Failure::invalid_spec(format!("the rendered url is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Failure::invalid_spec(format!(
                "the rendered url has scheme {}, not http or https",
                url.scheme()
            )));
        }
        // An address in the URL is never resolved: check it here, in the form the client reads
        // it (`127.1` is 127.0.0.1); names are checked by the resolver as they connect.
        if let Some(address) = egress::host_address(&url) {
            self.policy.check(address).map_err(|denied| egress_refused(&denied))?;
        }
        let mut headers = request_headers(&spec, message, delivery)?;
        if let Some(mark) = self.policy.delivery_mark() {
            headers.insert(egress::DELIVERY_MARK, HeaderValue::from_str(mark).expect("a mark is hex"));
        }
        let method = match spec.method {
            HttpMethod::GET => Method::GET,
            HttpMethod::POST => Method::POST,
            HttpMethod::PUT => Method::PUT,
            HttpMethod::PATCH => Method::PATCH,
            HttpMethod::DELETE => Method::DELETE,
        };
        let body = spec.body_template.as_ref().map(|body| serde_json::to_vec(body).expect("JSON serializes"));
        if let Some(signing) = &spec.signing {
            let timestamp = chrono::Utc::now().timestamp();
            let id = &message.idempotency_key;
            let signature = signing
                .signature(id, timestamp, body.as_deref().unwrap_or_default())
                .map_err(|why| Failure::invalid_spec(format!("the delivery cannot be signed: {why}")))?;
            let id = HeaderValue::from_str(id)
                .map_err(|_| Failure::invalid_spec("the message id cannot be sent as the webhook-id header"))?;
            headers.insert(signing::ID, id);
            headers.insert(signing::TIMESTAMP, HeaderValue::from(timestamp));
            headers.insert(signing::SIGNATURE, HeaderValue::from_str(&signature).expect("`v1,` and base64 are ASCII"));
        }
        Ok(PreparedRequest {
            outgoing: Outgoing { method, url, headers, body },
            timeout,
            expected_status_codes: spec.expected_status_codes,
        })
    }
}

/// 408, 429 and 5xx may pass on a later try; other refusals (4xx) will not.
pub fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT || status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// The spec's headers, then `Idempotency-Key: <execution id>`, the attempt's `traceparent`, and
/// `Content-Type: application/json` for a body, each unless the spec sets its own.
fn request_headers(spec: &HttpSpec, message: &Message, delivery: &Delivery) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::with_capacity(spec.headers.len() + 3);
    for (name, value) in &spec.headers {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Failure::invalid_spec(format!("header name `{name}` is not valid")))?;
        // The value may hold a rendered secret: name the header, never quote the value.
        let header_value = HeaderValue::from_str(value)
            .map_err(|_| Failure::invalid_spec(format!("header `{name}` rendered to a value HTTP cannot carry")))?;
        headers.insert(header_name, header_value);
    }
    if !headers.contains_key("idempotency-key") {
        let key = HeaderValue::from_str(&message.idempotency_key)
            .map_err(|_| Failure::invalid_spec("the idempotency key cannot be sent as a header"))?;
        headers.insert("idempotency-key", key);
    }
    if let Some(traceparent) = &delivery.traceparent {
        if !headers.contains_key(TRACEPARENT) {
            headers.insert(
                TRACEPARENT,
                HeaderValue::from_str(traceparent.as_str()).expect("a checked traceparent is ASCII"),
            );
        }
    }
    if spec.body_template.is_some() && !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    Ok(headers)
}

fn transport_failure(error: SendError) -> Failure {
    let error = match error {
        SendError::Timeout => return Failure::timeout("no complete response before the timeout"),
        SendError::Failed(error) => error,
    };
    // The egress policy refused every address of the name: permanent, and said plainly.
    if let Some(denied) = egress::denied_in(error.as_ref()) {
        return egress_refused(denied);
    }
    // The client's errors never quote the URL (which may carry a rendered secret in its
    // query); the chain of causes says what failed.
    Failure::connection(crate::error_chain::describe(error.as_ref()))
}

/// `Retry-After` on a 429 or 503, in seconds or as an HTTP date, as milliseconds from now.
fn retry_after_ms(status: StatusCode, headers: &HeaderMap) -> Option<u64> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds.saturating_mul(1000));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delay = at.signed_duration_since(chrono::Utc::now()).num_milliseconds();
    Some(u64::try_from(delay).unwrap_or(0))
}
