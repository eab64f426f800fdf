//! The HTTP transport's client: hyper-util's pooled HTTP/1 client over rustls, connecting only
//! where the egress policy allows.
//!
//! Not reqwest, as the transport used until 2026-11-26: every delivery in flight holds one of
//! these requests and its connection, and reqwest's layers above hyper-util (its own request and
//! response types, redirect and proxy machinery, a boxed timeout per request) held ~4.5 KiB
//! more per request in flight and cost CPU on every delivery for features a delivery turns off
//! (docs/benchmarks.md: a worker with 10,000 in flight 359 → 314 MiB; native deliveries at 64
//! concurrent +33%). What reqwest did that a delivery relies on is
//! done here: a default `User-Agent`, credentials in the URL sent as Basic authorization (and
//! not in the request target), one timeout over the request and the body's read, the
//! resolver's refusal kept in the error's chain of causes.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, USER_AGENT};
use hyper::{Method, Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::egress::{EgressPolicy, PolicyResolver};

/// Sent unless the endpoint's spec sets its own.
const DEFAULT_USER_AGENT: &str = concat!("taskexec/", env!("CARGO_PKG_VERSION"));
/// Idle keep-alive connections kept per receiver host.
const POOL_MAX_IDLE_PER_HOST: usize = 256;
/// How long an idle connection is kept before it is closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

type Connector = HttpsConnector<HttpConnector<PolicyResolver>>;

/// A request as the transport sends it.
pub struct Outgoing {
    pub method: Method,
    pub url: url::Url,
    pub headers: HeaderMap,
    pub body: Option<Vec<u8>>,
}

/// A response with its body read (up to a limit).
pub struct Answer {
    pub response: hyper::http::response::Parts,
    pub body: Vec<u8>,
    /// The body went on past the limit and was cut.
    pub truncated: bool,
}

/// Why no answer came.
#[derive(Debug)]
pub enum SendError {
    /// Nothing complete before the timeout.
    Timeout,
    /// The connection, the request or the response failed; the chain of causes says how.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

#[derive(Clone)]
pub struct Client {
    inner: hyper_util::client::legacy::Client<Connector, Full<Bytes>>,
}

impl Client {
    /// Every connection held to `policy`: names are resolved by [`PolicyResolver`], which
    /// drops the addresses the policy refuses. No proxy: `HTTP_PROXY` and friends in the
    /// service's environment are not a delivery's way out (a proxy would connect where the
    /// policy never looks). No redirects: a redirect is an answer, judged like any status.
    pub fn new(policy: Arc<EgressPolicy>) -> Self {
        let mut http = HttpConnector::new_with_resolver(PolicyResolver { policy });
        http.set_nodelay(true);
        // The TLS layer above takes https:// itself.
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let inner = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_HOST)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Self { inner }
    }

    /// Send `outgoing` and read at most `body_limit` bytes of the answer's body, all within
    /// `timeout`.
    pub async fn send(&self, outgoing: Outgoing, timeout: Duration, body_limit: usize) -> Result<Answer, SendError> {
        let request = request(outgoing).map_err(|e| SendError::Failed(e.into()))?;
        let exchange = async {
            let response = self.inner.request(request).await.map_err(|e| SendError::Failed(e.into()))?;
            read(response, body_limit).await.map_err(|e| SendError::Failed(e.into()))
        };
        tokio::time::timeout(timeout, exchange).await.unwrap_or(Err(SendError::Timeout))
    }
}

/// The hyper request of `outgoing`: credentials in its URL move to an `Authorization` header,
/// as browsers and curl send them, and out of the request's target.
fn request(outgoing: Outgoing) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
    let Outgoing { method, mut url, mut headers, body } = outgoing;
    if !url.username().is_empty() || url.password().is_some() {
        if !headers.contains_key(AUTHORIZATION) {
            headers.insert(AUTHORIZATION, basic_authorization(&url));
        }
        // Infallible for the http(s) URLs the transport sends: both have a host.
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    if !headers.contains_key(USER_AGENT) {
        headers.insert(USER_AGENT, HeaderValue::from_static(DEFAULT_USER_AGENT));
    }
    let uri: Uri = url.as_str().parse()?;
    let mut request =
        Request::builder().method(method).uri(uri).body(Full::new(Bytes::from(body.unwrap_or_default())))?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// `Basic base64(user:password)` of the URL's credentials, percent-decoded, marked sensitive.
fn basic_authorization(url: &url::Url) -> HeaderValue {
    let user = percent_encoding::percent_decode_str(url.username()).decode_utf8_lossy();
    let password = url.password().map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy());
    let credentials = format!("{user}:{}", password.as_deref().unwrap_or(""));
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

/// The response's head, and at most `limit` bytes of its body (whether more was cut).
async fn read(response: Response<Incoming>, limit: usize) -> Result<Answer, hyper::Error> {
    let (response, mut incoming) = response.into_parts();
    let mut body = Vec::new();
    while let Some(frame) = incoming.frame().await {
        let Ok(chunk) = frame?.into_data() else { continue };
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok(Answer { response, body, truncated: true });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer { response, body, truncated: false })
}
