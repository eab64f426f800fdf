//! The client plugins' requests go out through: hyper-util's pooled HTTP/1 client over rustls,
//! connecting only to the addresses its [`Resolve`] hands it (a plugin's grants on top of the
//! egress policy). A plugin streams bodies both ways, which hyper's body types carry; the HTTP
//! transport, which sends a whole request and reads a bounded answer, has its own lighter
//! client (`h1.rs`). Both send credentials in the URL as Basic authorization, never in the
//! request's target, and keep the resolver's refusal in the error's chain of causes.
//!
//! Not reqwest, as both used until 2026-11-26: its layers above hyper-util (its own request and
//! response types, redirect and proxy machinery, a boxed timeout per request) held ~4.5 KiB more
//! per request in flight and cost CPU on every request for features these requests turn off
//! (docs/benchmarks.md).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use hyper::{Method, Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Idle keep-alive connections kept per receiver (host, or scheme, host and port for `h1`).
pub(super) const POOL_MAX_IDLE_PER_HOST: usize = 256;
/// How long an idle connection is kept before it is closed (both clients).
pub(super) const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

type Connector = HttpsConnector<HttpConnector<Resolver>>;
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// The addresses a name may be connected to, or why none.
pub type Resolving = Pin<Box<dyn Future<Output = Result<Vec<SocketAddr>, BoxError>> + Send>>;

/// Resolves the names a client connects to: only addresses it returns are ever connected to,
/// so a check made here holds for the connection (a name cannot change its answer between a
/// check and the connect). Called on the sending task when a new connection starts.
pub trait Resolve: Send + Sync + 'static {
    fn resolve(&self, name: &str) -> Resolving;
}

/// hyper-util's resolver service over a [`Resolve`].
#[derive(Clone)]
struct Resolver(Arc<dyn Resolve>);

impl tower::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolving = self.0.resolve(name.as_str());
        Box::pin(async move { resolving.await.map(Vec::into_iter) })
    }
}

#[derive(Clone)]
pub struct Client {
    inner: hyper_util::client::legacy::Client<Connector, Full<Bytes>>,
}

impl Client {
    /// Every connection to an address `resolver` returned (an address in a URL is never
    /// resolved: the caller checks it). No proxy: `HTTP_PROXY` and friends in the service's
    /// environment are not a delivery's way out (a proxy would connect where no check looks).
    /// No redirects: a redirect is an answer, judged like any status, and cannot bounce a
    /// signed request to another host.
    pub fn new(resolver: impl Resolve) -> Self {
        let mut http = HttpConnector::new_with_resolver(Resolver(Arc::new(resolver)));
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

    /// Send `request` and wait for the answer's head; its body is still to be read.
    pub async fn head(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
        self.inner.request(request).await
    }
}

/// The request to send: credentials in the URL move to an `Authorization` header (unless it
/// has one), as browsers and curl send them, and out of the request's target.
pub fn request(
    method: Method,
    mut url: url::Url,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
    if authorize_from_url(&url, &mut headers) {
        // Infallible for URLs with a host, as every http(s) URL has.
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    let uri: Uri = url.as_str().parse()?;
    let mut request = Request::builder().method(method).uri(uri).body(Full::new(body))?;
    *request.headers_mut() = headers;
    Ok(request)
}

/// Credentials in `url` as an `Authorization` header (unless `headers` has one), as browsers
/// and curl send them; whether the URL had any (the caller keeps them out of what it sends).
pub(super) fn authorize_from_url(url: &url::Url, headers: &mut HeaderMap) -> bool {
    let credentials = !url.username().is_empty() || url.password().is_some();
    if credentials && !headers.contains_key(AUTHORIZATION) {
        headers.insert(AUTHORIZATION, basic_authorization(url));
    }
    credentials
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

/// At most `limit` bytes of `body`; true when there was more (left unread).
pub async fn read_limited(body: &mut Incoming, limit: usize) -> Result<(Vec<u8>, bool), hyper::Error> {
    let mut collected = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame?.into_data() else { continue };
        let room = limit - collected.len();
        if chunk.len() > room {
            collected.extend_from_slice(&chunk[..room]);
            return Ok((collected, true));
        }
        collected.extend_from_slice(&chunk);
    }
    Ok((collected, false))
}
