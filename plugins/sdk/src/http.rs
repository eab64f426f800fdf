//! Outbound HTTP over wasi:http, in a few lines:
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

use crate::bindings::wasi::http::outgoing_handler;
use crate::bindings::wasi::http::types::{
    ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
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
    pub fn send(self) -> Result<Response, Failure> {
        let (scheme, authority, path) = split_url(&self.url).map_err(fail::invalid_spec)?;
        let fields = Fields::from_list(&self.headers)
            .map_err(|e| fail::invalid_spec(format!("a header cannot be sent: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let invalid = |what: &str| fail::invalid_spec(format!("the request's {what} cannot be sent"));
        request.set_method(&self.method).map_err(|_| invalid("method"))?;
        request.set_scheme(Some(&scheme)).map_err(|_| invalid("scheme"))?;
        request.set_authority(Some(&authority)).map_err(|_| invalid("host"))?;
        request.set_path_with_query(Some(&path)).map_err(|_| invalid("path"))?;
        // The whole body is written and finished before `handle`: the host then sends the
        // request at once, on the call's own task.
        let outgoing = request.body().map_err(|_| fail::internal("the request has no body"))?;
        write_all(&outgoing, &self.body)?;
        OutgoingBody::finish(outgoing, None)
            .map_err(|e| fail::connection(format!("sending the body failed: {e:?}")))?;
        let options = self.timeout_ms.map(|ms| {
            let options = RequestOptions::new();
            // A host that does not take the option still bounds the call by its deadline.
            let _ = options.set_first_byte_timeout(Some(ms.saturating_mul(1_000_000)));
            options
        });
        let pending = outgoing_handler::handle(request, options).map_err(|code| from_error_code(&authority, code))?;
        let answer = match pending.get() {
            Some(answer) => answer,
            None => {
                pending.subscribe().block();
                pending.get().ok_or_else(|| fail::connection("the answer never arrived"))?
            }
        };
        let response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(code)) => return Err(from_error_code(&authority, code)),
            Err(()) => return Err(fail::internal("the answer was taken twice")),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
            .collect();
        let (body, truncated) = read_body(response, self.max_response_bytes);
        Ok(Response { status, headers, body, truncated })
    }
}

fn write_all(outgoing: &OutgoingBody, body: &[u8]) -> Result<(), Failure> {
    let stream = outgoing.write().map_err(|_| fail::internal("the request body cannot be written"))?;
    let mut rest = body;
    while !rest.is_empty() {
        let permitted =
            stream.check_write().map_err(|e| fail::connection(format!("writing the body failed: {e:?}")))?;
        if permitted == 0 {
            // The host holds a bounded body before the request goes (16 writes); it makes room
            // only once `handle` sends, so waiting here would wait for ever.
            return Err(fail::invalid_spec(format!(
                "the body is too large to send with this client ({} bytes left unsent)",
                rest.len()
            )));
        }
        let (chunk, remaining) = rest.split_at(rest.len().min(usize::try_from(permitted).unwrap_or(usize::MAX)));
        stream.write(chunk).map_err(|e| fail::connection(format!("writing the body failed: {e:?}")))?;
        rest = remaining;
    }
    Ok(())
}

fn read_body(response: crate::bindings::wasi::http::types::IncomingResponse, max: usize) -> (Vec<u8>, bool) {
    let mut body = Vec::new();
    let Ok(incoming) = response.consume() else { return (body, false) };
    let Ok(stream) = incoming.stream() else { return (body, false) };
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) if !chunk.is_empty() => {
                if body.len() + chunk.len() > max {
                    body.extend_from_slice(&chunk[..max - body.len()]);
                    return (body, true);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(_) => continue,
            Err(_) => return (body, false),
        }
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
fn from_error_code(authority: &str, code: ErrorCode) -> Failure {
    match code {
        ErrorCode::HttpRequestDenied => fail::rejected(
            None,
            false,
            format!("the host refused the request to {authority}: this plugin is not granted it"),
        ),
        ErrorCode::DestinationIpProhibited => fail::rejected(
            None,
            false,
            format!("the service's egress policy refuses {authority} (TE_EGRESS_ALLOW / TE_EGRESS_DENY)"),
        ),
        ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout
        | ErrorCode::DnsTimeout => fail::timeout(format!("{authority} did not answer in time ({code:?})")),
        ErrorCode::HttpRequestMethodInvalid
        | ErrorCode::HttpRequestUriInvalid
        | ErrorCode::HttpRequestUriTooLong
        | ErrorCode::HttpRequestHeaderSectionSize(_)
        | ErrorCode::HttpRequestHeaderSize(_)
        | ErrorCode::HttpRequestBodySize(_) => fail::invalid_spec(format!("the request cannot be sent: {code:?}")),
        other => fail::connection(format!("{authority} could not be reached: {other:?}")),
    }
}

/// `scheme://authority/path?query`, split for wasi:http.
fn split_url(url: &str) -> Result<(Scheme, String, String), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("`{url}` is not an absolute http(s) URL"))?;
    let scheme = match scheme {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        other => return Err(format!("the URL's scheme must be http or https, not {other}")),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_owned()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_owned()),
    };
    if authority.is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    Ok((scheme, authority.to_owned(), path))
}

/// Checks a URL's form as `send` would (for `validate`): absolute, http or https, with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    split_url(url).map(|_| ())
}
