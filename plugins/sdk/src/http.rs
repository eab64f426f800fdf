//! Outbound HTTP in a few lines, through the host's `http-client` (one host call a request):
//!
//! ```ignore
//! let answer = http::post(&spec.url).header("authorization", &token).json(&body).send()?;
//! answer.receipt() // 2xx: the receipt; otherwise the failure the host should see
//! ```
//!
//! Only hosts granted when the plugin was installed (`--allow-host`) can be reached; a request
//! to any other fails permanently, and the host names the grant to add. Every request is
//! bounded by the call's deadline (the endpoint's `timeout_ms`) whatever [`Request::timeout_ms`]
//! says.

use crate::bindings::taskexec::plugin::http_client::{self, SendError};
use crate::bindings::wasi::http::types::Method;
use crate::{fail, Failure, Receipt};

/// What a response body is read up to unless [`Request::max_response_bytes`] says otherwise.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// A request being built; [`Request::send`] sends it.
#[must_use]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    timeout_ms: Option<u64>,
    max_response_bytes: usize,
}

pub fn get(url: &str) -> Request {
    request(Method::Get, url)
}

pub fn post(url: &str) -> Request {
    request(Method::Post, url)
}

pub fn put(url: &str) -> Request {
    request(Method::Put, url)
}

pub fn request(method: Method, url: &str) -> Request {
    Request {
        method,
        url: url.to_owned(),
        headers: Vec::new(),
        body: Vec::new(),
        timeout_ms: None,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
    }
}

impl Request {
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push((name.to_ascii_lowercase(), value.as_ref().to_vec()));
        self
    }

    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// `value` as the JSON body, with `content-type: application/json` (unless set already).
    pub fn json(self, value: &serde_json::Value) -> Self {
        let request = self.body(serde_json::to_vec(value).expect("a JSON value serializes"));
        if request.headers.iter().any(|(name, _)| name == "content-type") {
            request
        } else {
            request.header("content-type", "application/json")
        }
    }

    /// Give up waiting for the answer's first byte after `ms` (the call's deadline holds too).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Read at most `bytes` of the answer's body; the rest is dropped and
    /// [`Response::truncated`] says so.
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// Send it and read the answer. Any answer is `Ok`, whatever its status (see
    /// [`Response::error_for_status`]); a request that got no answer is the [`Failure`] the
    /// host should see.
    ///
    /// One host call (`taskexec:plugin/http-client.send`): the request goes whole and the
    /// answer comes back whole, under the same grants and deadline as wasi:http, without its
    /// twenty-odd calls for fields, streams and futures.
    pub fn send(self) -> Result<Response, Failure> {
        let authority = authority(&self.url).map_err(fail::invalid_spec)?.to_owned();
        let request = http_client::Request {
            method: method_name(&self.method).to_owned(),
            url: self.url,
            headers: self.headers,
            body: self.body,
            first_byte_timeout_ms: self.timeout_ms,
            max_response_bytes: u64::try_from(self.max_response_bytes).unwrap_or(u64::MAX),
        };
        let answer = http_client::send(&request).map_err(|error| from_send_error(&authority, error))?;
        let headers = answer
            .headers
            .into_iter()
            .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
            .collect();
        Ok(Response { status: answer.status, headers, body: answer.body, truncated: answer.truncated })
    }
}

/// How `method` is spelled on the wire.
fn method_name(method: &Method) -> &str {
    match method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        Method::Connect => "CONNECT",
        Method::Options => "OPTIONS",
        Method::Trace => "TRACE",
        Method::Patch => "PATCH",
        Method::Other(other) => other,
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Names in lower case, as they came.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than the request's `max_response_bytes` and was cut there.
    pub truncated: bool,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `Retry-After` (seconds or an HTTP date) in milliseconds from now.
    pub fn retry_after_ms(&self) -> Option<u64> {
        let value = self.header("retry-after")?.trim();
        if let Ok(seconds) = value.parse::<u64>() {
            return Some(seconds.saturating_mul(1000));
        }
        let at = httpdate::parse_http_date(value).ok()?;
        Some(at.duration_since(std::time::SystemTime::now()).map(|d| d.as_millis() as u64).unwrap_or(0))
    }

    /// A 2xx answer as it is; any other as the failure the host should see: 408, 429 and
    /// 5xx are retryable (after `Retry-After` when given), any other status is permanent.
    pub fn error_for_status(self) -> Result<Self, Failure> {
        if self.is_success() {
            return Ok(self);
        }
        let status = self.status;
        let retryable = status == 408 || status == 429 || status >= 500;
        let text = self.text();
        let excerpt: String = text.chars().take(512).collect();
        let failure = fail::rejected(Some(status), retryable, format!("HTTP {status}: {excerpt}"));
        Err(match self.retry_after_ms() {
            Some(ms) if retryable => fail::retry_after(failure, ms),
            _ => failure,
        })
    }

    /// A 2xx answer as the receipt `{"status_code": …, "body": "…"}`; any other as
    /// [`Response::error_for_status`] says.
    pub fn receipt(self) -> Result<Receipt, Failure> {
        let ok = self.error_for_status()?;
        Ok(Receipt::json(&serde_json::json!({"status_code": ok.status, "body": ok.text()})))
    }
}

/// What a request that got no answer says to the host.
fn from_send_error(authority: &str, error: SendError) -> Failure {
    match error {
        SendError::InvalidRequest(why) => fail::invalid_spec(format!("the request cannot be sent: {why}")),
        SendError::NotGranted(_) => fail::rejected(
            None,
            false,
            format!("the host refused the request to {authority}: this plugin is not granted it"),
        ),
        // `why` names the rule: the operator's policy (TE_EGRESS_ALLOW / TE_EGRESS_DENY), or an
        // internal address the plugin was granted by name only.
        SendError::Prohibited(why) => {
            fail::rejected(None, false, format!("the request to {authority} was refused: {why}"))
        }
        SendError::Timeout => fail::timeout(format!("{authority} did not answer in time")),
        SendError::Connection(why) => fail::connection(format!("{authority} could not be reached: {why}")),
    }
}

/// The authority of `scheme://authority/path?query`, once the URL is checked to be absolute
/// http(s) with a host (failures name the destination by it).
fn authority(url: &str) -> Result<&str, String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("`{url}` is not an absolute http(s) URL"))?;
    if !matches!(scheme, "http" | "https") {
        return Err(format!("the URL's scheme must be http or https, not {scheme}"));
    }
    let authority = rest.find(['/', '?']).map_or(rest, |end| &rest[..end]);
    if authority.is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    Ok(authority)
}

/// Checks a URL's form as `send` would (for `validate`): absolute, http or https, with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    authority(url).map(|_| ())
}
