//! The `http-client` import: a plugin's HTTP request in one host call.
//!
//! Through wasi:http a request and its answer cross some twenty host calls (fields, request,
//! body and its stream, the future, the response, its headers, its body and stream again), each
//! a trip through wasmtime's call machinery and the resource table, and the profile of a plugin
//! delivery at 64 concurrent put that machinery beside instantiation as a plugin's largest cost
//! over native. Here the request arrives whole and the answer leaves whole, and in between it
//! takes the very path wasi:http's requests take: `Outbound::exchange` — the grants, the
//! operator's egress policy on the address connected to, the call's deadline, the attempt's
//! `traceparent`.

use std::time::Duration;

use axum::body::Bytes;
use axum::http;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH};
use wasmtime_wasi_http::{Error, RequestOptions, DEFAULT_FORBIDDEN_HEADERS};

use super::outbound::{read_body, scheme_and_port, Outbound, MAX_RESPONSE_BYTES};
use super::sandbox::PluginState;
use crate::contract::http_client_imports::{Host, Request, Response, SendError};

impl Host for PluginState {
    async fn send(&mut self, request: Request) -> Result<Response, SendError> {
        let max = usize::try_from(request.max_response_bytes).unwrap_or(usize::MAX).min(MAX_RESPONSE_BYTES);
        let options = request.first_byte_timeout_ms.map(|ms| RequestOptions {
            first_byte_timeout: Some(Duration::from_millis(ms)),
            ..RequestOptions::default()
        });
        let request = build(request).map_err(SendError::InvalidRequest)?;
        let destination = destination(request.uri());
        let why = |error| send_error(&self.outbound, &destination, error);
        let mut response = self.outbound.clone().exchange(request, options).await.map_err(why)?;
        let status = response.head.status().as_u16();
        let headers = response
            .head
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
            .collect();
        let (body, truncated) = read_body(&mut response, max).await.map_err(why)?;
        Ok(Response { status, headers, body, truncated })
    }
}

/// `scheme://host:port`, as grants and refusals name a destination.
fn destination(uri: &http::Uri) -> String {
    let (scheme, port) = scheme_and_port(uri);
    format!("{scheme}://{}:{port}", uri.host().unwrap_or_default())
}

/// Why the request got no answer, as the plugin is told it. A refusal's reason is the one the
/// call's denials recorded (they name the rule or the address).
fn send_error(outbound: &Outbound, destination: &str, error: Error) -> SendError {
    match error {
        Error::HttpRequestDenied => SendError::NotGranted(destination.to_owned()),
        Error::DestinationIpProhibited => SendError::Prohibited(
            outbound.denials().pop().unwrap_or_else(|| format!("{destination} is refused by the egress policy")),
        ),
        Error::HttpRequestUriInvalid => SendError::InvalidRequest(format!("url: {destination} cannot be sent")),
        Error::ConnectionTimeout
        | Error::ConnectionReadTimeout
        | Error::ConnectionWriteTimeout
        | Error::HttpResponseTimeout
        | Error::DnsTimeout => SendError::Timeout,
        Error::DestinationNotFound => SendError::Connection(format!("{destination}: the name does not resolve")),
        Error::ConnectionRefused => SendError::Connection(format!("{destination} refused the connection")),
        other => SendError::Connection(format!("{destination}: {other}")),
    }
}

/// The request as the client sends it; Err names the field that cannot be sent, and why.
fn build(request: Request) -> Result<http::Request<Bytes>, String> {
    let method = http::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| format!("method: `{}` is not an HTTP method", request.method))?;
    let uri: http::Uri = request.url.parse().map_err(|e| format!("url: `{}` is not a URL ({e})", request.url))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none_or(str::is_empty) {
        return Err(format!("url: `{}` is not an absolute http(s) URL with a host", request.url));
    }
    let mut headers = http::HeaderMap::with_capacity(request.headers.len());
    for (name, value) in request.headers {
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: `{name}` is not a valid header name"))?;
        if DEFAULT_FORBIDDEN_HEADERS.contains(&parsed) {
            return Err(format!("headers: `{name}` is set by the host and may not be sent by a plugin"));
        }
        let value = HeaderValue::from_bytes(&value)
            .map_err(|_| format!("headers: the value of `{name}` is not a valid header value"))?;
        if parsed == CONTENT_LENGTH {
            // The host sends the body's length; a different one would be a lie to the receiver.
            if value.to_str().ok().and_then(|v| v.trim().parse::<usize>().ok()) != Some(request.body.len()) {
                return Err(format!("headers: content-length is not the body's length ({} bytes)", request.body.len()));
            }
            continue;
        }
        headers.append(parsed, value);
    }
    let mut built = http::Request::builder().method(method).uri(uri).body(Bytes::from(request.body)).map_err(|e| {
        // Every part was checked above; this names whatever the builder still refuses.
        format!("the request cannot be built: {e}")
    })?;
    *built.headers_mut() = headers;
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, url: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Request {
        Request {
            method: method.into(),
            url: url.into(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect(),
            body: body.to_vec(),
            first_byte_timeout_ms: None,
            max_response_bytes: 1024,
        }
    }

    #[test]
    fn a_request_that_cannot_be_sent_names_its_field() {
        let cases: [(Request, &str); 7] = [
            (request("GE T", "http://a.test/", &[], b""), "method: `GE T`"),
            (request("GET", "not a url", &[], b""), "url: `not a url`"),
            (request("GET", "ftp://a.test/x", &[], b""), "absolute http(s) URL"),
            (request("GET", "/relative", &[], b""), "absolute http(s) URL"),
            (request("GET", "http://a.test/", &[("bad name", b"x")], b""), "headers: `bad name`"),
            (request("GET", "http://a.test/", &[("x-a", b"line\nbreak")], b""), "the value of `x-a`"),
            (request("GET", "http://a.test/", &[("Host", b"other.test")], b""), "`Host` is set by the host"),
        ];
        for (request, expected) in cases {
            let error = build(request).expect_err(expected);
            assert!(error.contains(expected), "{error:?} does not name {expected:?}");
        }
        let lying = build(request("POST", "http://a.test/", &[("content-length", b"5")], b"abc")).unwrap_err();
        assert!(lying.contains("content-length is not the body's length (3 bytes)"), "{lying}");
    }

    #[test]
    fn a_request_keeps_its_headers_in_order_and_its_body() {
        let built = build(request(
            "PATCH",
            "https://a.test:8443/in?x=1",
            &[("X-Tag", b"one"), ("x-tag", b"two"), ("content-length", b"3")],
            b"abc",
        ))
        .unwrap();
        assert_eq!(built.method(), http::Method::PATCH);
        assert_eq!(built.uri().to_string(), "https://a.test:8443/in?x=1");
        let tags: Vec<_> = built.headers().get_all("x-tag").iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(tags, ["one", "two"]);
        assert!(built.headers().get(CONTENT_LENGTH).is_none(), "the client sets the length itself");
        assert_eq!(built.body().as_ref(), b"abc");
    }
}
