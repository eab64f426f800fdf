//! Outbound HTTP from plugins, the policy half: the grant checks every request passes (on the
//! address connected to, through a resolver of its own), the operator's egress policy on top,
//! the pooled client requests are sent through, and the hooks wasmtime-wasi-http calls. The
//! functions a plugin calls (`handle`, `get`) are linked in [`super::wasi_http`].
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::http;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::grants::{is_internal, Grants};
use crate::egress::EgressPolicy;
use crate::transport::http::client::{self, BoxError, Client, Resolve, Resolving};
use crate::transport::PooledTransports;

/// Largest response body a plugin is handed, so one answer cannot exhaust the host.
pub(super) const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Writes to a request body that may wait before `handle` is called (wasmtime-wasi-http's
/// default is one): enough for a plugin to write a body of 64 KiB in 4 KiB
/// `blocking-write-and-flush` calls, or up to 16 MiB in `write` calls, and then send it.
const BODY_WRITES_BUFFERED: usize = 15;

/// The requests a call tried to send where its grants did not allow, for its logs.
pub type Denials = Arc<Mutex<Vec<String>>>;

/// Denied requests listed per call; a plugin looping over refused requests (thousands in a
/// call) gets the first ones listed and one line saying there were more.
const DENIALS_LISTED: usize = 50;

fn record_denial(denials: &Denials, why: String) {
    let mut denials = denials.lock().expect("denials lock");
    match denials.len() {
        n if n < DENIALS_LISTED => denials.push(why),
        n if n == DENIALS_LISTED => {
            denials.push(format!("more requests were denied; only the first {DENIALS_LISTED} are listed"))
        }
        _ => {}
    }
}

/// A plugin version's way out: its grants, and the client that sends its requests.
///
/// The client is the plugin's own, with a DNS resolver that applies the grants to the very
/// addresses a connection is made to. Checking a name's addresses and then letting the client
/// resolve it again would let a name that changes its answer in between (DNS rebinding) reach
/// an address the check refused; and a pool shared between plugins would let one plugin reuse a
/// connection that only another's grants allowed. Connections are kept alive per plugin
/// version, so only a new connection resolves a name.
pub struct Egress {
    pub(super) grants: Arc<Grants>,
    policy: Arc<EgressPolicy>,
    client: Client,
    /// The Kafka and Redis clients the `kafka` and `redis-streams` imports go through (none
    /// for calls that may send nothing).
    pub(super) pooled: Option<PooledTransports>,
}

impl Egress {
    /// The destinations this plugin version was granted at install.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Under the default egress policy.
    pub fn new(grants: Arc<Grants>) -> Self {
        Self::with_policy(grants, Arc::default())
    }

    /// Held to `grants` and to the operator's `policy` (`TE_EGRESS_ALLOW` / `TE_EGRESS_DENY`).
    pub fn with_policy(grants: Arc<Grants>, policy: Arc<EgressPolicy>) -> Self {
        // No redirects (a host outside the grants must not be reachable that way: the plugin
        // sees the 3xx) and no proxy (the host's environment is not the plugin's way out).
        let client = Client::new(GrantedResolver { grants: grants.clone(), policy: policy.clone() });
        Self { grants, policy, client, pooled: None }
    }

    /// Produce and append through `pooled` (the process's own clients; without it, a plugin's
    /// `kafka` and `redis-streams` calls are refused).
    pub fn with_pooled(mut self, pooled: PooledTransports) -> Self {
        self.pooled = Some(pooled);
        self
    }

    /// No destination at all (registration-time calls).
    pub fn none() -> Self {
        Self::new(Arc::new(Grants::default()))
    }
}

/// One call's way out: its plugin's egress, where its denials are recorded, and the call's
/// deadline, which bounds every request it sends. It is also the call's wasi:http hooks.
#[derive(Clone)]
pub struct Outbound {
    pub(super) egress: Arc<Egress>,
    denials: Denials,
    /// The destinations (`scheme://host:port`) refused for want of a grant: the fix is the
    /// operator's, so the attempt's failure names it and is not retried.
    ungranted: Denials,
    pub(super) deadline: Option<Instant>,
    /// The attempt's trace context, sent as `traceparent` on each request that has none.
    pub(super) traceparent: Option<crate::trace::TraceParent>,
    /// The attempt a `deliver` call makes: what a record produced through the host belongs to.
    pub(super) attempt: Option<Arc<Attempt>>,
}

/// The attempt a transport plugin's `deliver` call is making.
#[derive(Debug)]
pub(super) struct Attempt {
    pub execution_id: String,
    pub attempt: u32,
    pub idempotency_key: String,
}

impl Outbound {
    pub fn new(egress: Arc<Egress>) -> Self {
        Self {
            egress,
            denials: Denials::default(),
            ungranted: Denials::default(),
            deadline: None,
            traceparent: None,
            attempt: None,
        }
    }

    /// This call delivers `message`: records produced through the host carry its execution.
    pub fn set_attempt(&mut self, message: &crate::contract::Message) {
        self.attempt = Some(Arc::new(Attempt {
            execution_id: message.execution_id.clone(),
            attempt: message.attempt,
            idempotency_key: message.idempotency_key.clone(),
        }));
    }

    /// The requests of this call continue `traceparent`'s trace (the attempt's).
    pub fn set_traceparent(&mut self, traceparent: Option<crate::trace::TraceParent>) {
        self.traceparent = traceparent;
    }

    /// No request of this call may outlast `deadline`.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = Some(deadline);
    }

    /// What this call tried to reach and was refused.
    pub fn denials(&self) -> Vec<String> {
        self.denials.lock().expect("denials lock").clone()
    }

    /// The destinations this call was refused for want of a grant.
    pub fn ungranted(&self) -> Vec<String> {
        self.ungranted.lock().expect("denials lock").clone()
    }

    pub(super) fn deny(&self, why: String) {
        record_denial(&self.denials, why);
    }

    /// `target` (`scheme://host:port`) was refused for want of a grant.
    pub(super) fn refuse_ungranted(&self, target: String) {
        self.deny(format!("{target} is not granted to this plugin"));
        let mut ungranted = self.ungranted.lock().expect("denials lock");
        if !ungranted.contains(&target) && ungranted.len() < DENIALS_LISTED {
            ungranted.push(target);
        }
    }

    /// Send one request if the grants allow its destination, and read its whole answer.
    pub(super) async fn send(
        self,
        request: http::Request<Bytes>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, Error> {
        let mut response = self.exchange(request, options).await?;
        let mut answer = http::Response::builder().status(response.head.status());
        if let Some(headers) = answer.headers_mut() {
            *headers = std::mem::take(response.head.headers_mut());
        }
        let (collected, cut) = read_body(&mut response, MAX_RESPONSE_BYTES).await?;
        if cut {
            return Err(Error::HttpResponseBodySize(Some(MAX_RESPONSE_BYTES as u64)));
        }
        let body = http_body_util::Full::new(Bytes::from(collected)).map_err(|never| match never {}).boxed_unsync();
        answer.body(body).map_err(|_| Error::HttpResponseIncomplete)
    }

    /// Send one request if the grants allow its destination; the answer's head, its body
    /// still to read (within the call's deadline).
    pub(super) async fn exchange(
        self,
        request: http::Request<Bytes>,
        options: Option<RequestOptions>,
    ) -> Result<Answering, Error> {
        let uri = request.uri();
        let (scheme, port) = scheme_and_port(uri);
        // Kept past the request's parts, for the resolver's checks.
        let scheme = scheme.to_owned();
        // Parsed once, as the client reads it, and handed to the client as parsed: the host
        // checked is the host connected to. An address in any spelling (`127.1`, `2130706433`,
        // `0x7f000001`, `127.0.0.1.`) is that address, and is checked as one.
        let Ok(url) = url::Url::parse(&uri.to_string()) else {
            return Err(Error::HttpRequestUriInvalid);
        };
        let (host, literal) = match url.host() {
            Some(url::Host::Domain(name)) => (name.to_owned(), None),
            Some(url::Host::Ipv4(v4)) => (v4.to_string(), Some(IpAddr::V4(v4))),
            Some(url::Host::Ipv6(v6)) => (v6.to_string(), Some(IpAddr::V6(v6))),
            None => (uri.host().unwrap_or_default().to_owned(), None),
        };
        if !self.egress.grants.allows(&scheme, &host, port) {
            self.refuse_ungranted(format!("{scheme}://{host}:{port}"));
            return Err(Error::HttpRequestDenied);
        }
        // An address in the URL is never resolved, so it is checked here; a name's addresses
        // are checked by the client's resolver as it connects.
        if let Some(ip) = literal {
            if !self.egress.grants.allows_address(ip, &scheme, port) {
                self.deny(format!("{scheme}://{host}:{port} is an internal address not granted by address"));
                return Err(Error::DestinationIpProhibited);
            }
            if let Err(denied) = self.egress.policy.check(ip) {
                self.deny(format!("{scheme}://{host}:{port}: {denied}"));
                return Err(Error::DestinationIpProhibited);
            }
        }
        let asked = options.as_ref().and_then(|o| o.first_byte_timeout.or(o.connect_timeout));
        let left = self.deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let timeout = match (asked, left) {
            (_, Some(left)) if left.is_zero() => return Err(Error::ConnectionTimeout),
            (Some(a), Some(l)) => Some(a.min(l)),
            (a, l) => a.or(l),
        };
        let (mut parts, body) = request.into_parts();
        if let Some(mark) = self.egress.policy.delivery_mark() {
            let value = http::HeaderValue::from_str(mark).expect("a mark is hex");
            parts.headers.insert(crate::egress::DELIVERY_MARK, value);
        }
        if let Some(traceparent) = &self.traceparent {
            if !parts.headers.contains_key(crate::trace::TRACEPARENT) {
                let value = http::HeaderValue::from_str(traceparent.as_str()).expect("a checked traceparent is ASCII");
                parts.headers.insert(crate::trace::TRACEPARENT, value);
            }
        }
        let outgoing =
            client::request(parts.method, url, parts.headers, body).map_err(|_| Error::HttpRequestUriInvalid)?;
        // One deadline for the head and the body's read, as the timeout a plugin asks for is
        // for its whole answer.
        let until = timeout.map(|t| tokio::time::Instant::now() + t);
        let destination = Destination { host, scheme, port, denials: self.denials.clone() };
        let head = DESTINATION.scope(destination, within(until, self.egress.client.head(outgoing)));
        match head.await {
            Some(Ok(head)) => Ok(Answering { head, until }),
            Some(Err(error)) => Err(transport_error(&error)),
            None => Err(Error::ConnectionReadTimeout),
        }
    }
}

/// An answer whose head has arrived; its body is read by [`read_body`] before `until`.
pub(super) struct Answering {
    pub head: http::Response<Incoming>,
    until: Option<tokio::time::Instant>,
}

/// `future`'s output, or None when `until` passes first.
async fn within<T>(until: Option<tokio::time::Instant>, future: impl std::future::Future<Output = T>) -> Option<T> {
    match until {
        Some(until) => tokio::time::timeout_at(until, future).await.ok(),
        None => Some(future.await),
    }
}

/// A request's scheme (https when it names none) and port (the scheme's default when it names
/// none), as grants and refusals read a destination.
pub(super) fn scheme_and_port(uri: &http::Uri) -> (&str, u16) {
    let scheme = uri.scheme_str().unwrap_or("https");
    let port = uri.port_u16().unwrap_or(if scheme == "http" { 80 } else { 443 });
    (scheme, port)
}

/// Read the answer's body up to `max` bytes; true when there was more (left unread).
pub(super) async fn read_body(answering: &mut Answering, max: usize) -> Result<(Vec<u8>, bool), Error> {
    match within(answering.until, client::read_limited(answering.head.body_mut(), max)).await {
        Some(Ok(read)) => Ok(read),
        Some(Err(error)) => Err(transport_error(&error)),
        None => Err(Error::ConnectionReadTimeout),
    }
}

tokio::task_local! {
    /// The request being sent, for the resolver: which scheme and port an address is checked
    /// for, and where a refusal is recorded.
    static DESTINATION: Destination;
}

#[derive(Clone)]
struct Destination {
    host: String,
    scheme: String,
    port: u16,
    denials: Denials,
}

/// Why the resolver gave a connection no address.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("the name resolves to an internal address not granted by address")]
    Internal,
    #[error("the name does not resolve")]
    NotFound,
}

/// Resolves names for one plugin's client, keeping to its grants: a name that resolves to an
/// internal address (loopback, link-local, metadata…) is refused unless a grant names that
/// address for the request's scheme and port.
struct GrantedResolver {
    grants: Arc<Grants>,
    policy: Arc<EgressPolicy>,
}

impl Resolve for GrantedResolver {
    fn resolve(&self, name: &str) -> Resolving {
        let (grants, policy, name) = (self.grants.clone(), self.policy.clone(), name.to_owned());
        // Read when the connection starts, on the sending task; a resolution outside any send
        // (none is expected) gets no destination and no internal address.
        let destination = DESTINATION.try_with(Destination::clone).ok();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await
                .map_err(|_| Box::new(Refused::NotFound) as BoxError)?
                .collect();
            let allowed = |ip: IpAddr| match &destination {
                Some(d) => grants.allows_address(ip, &d.scheme, d.port),
                None => !is_internal(ip),
            };
            if let Some((refused, denied)) =
                found.iter().find_map(|a| policy.check(a.ip()).err().map(|denied| (a, denied)))
            {
                if let Some(d) = &destination {
                    record_denial(
                        &d.denials,
                        format!("{}://{}:{} resolves to {}: {denied}", d.scheme, d.host, d.port, refused.ip()),
                    );
                }
                return Err(Box::new(Refused::Internal) as BoxError);
            }
            if let Some(refused) = found.iter().find(|a| !allowed(a.ip())) {
                if let Some(d) = &destination {
                    record_denial(
                        &d.denials,
                        format!(
                            "{}://{}:{} resolves to {}, an internal address not granted by address",
                            d.scheme,
                            d.host,
                            d.port,
                            refused.ip()
                        ),
                    );
                }
                return Err(Box::new(Refused::Internal) as BoxError);
            }
            Ok(found)
        })
    }
}

/// The wasi:http error of a request that failed: the resolver's refusal where it is among
/// the causes, a failed connect, or a connection that broke off.
fn transport_error(error: &(dyn std::error::Error + 'static)) -> Error {
    let mut source = Some(error);
    let mut connect = false;
    while let Some(cause) = source {
        match cause.downcast_ref::<Refused>() {
            Some(Refused::Internal) => return Error::DestinationIpProhibited,
            Some(Refused::NotFound) => return Error::DestinationNotFound,
            None => {}
        }
        connect |= cause.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|e| e.is_connect());
        source = cause.source();
    }
    if connect {
        Error::ConnectionRefused
    } else {
        Error::ConnectionTerminated
    }
}

impl WasiHttpHooks for Outbound {
    /// Not reached through `handle` (defined below in place of wasmtime-wasi-http's), but any
    /// other path into wasmtime-wasi-http's sending goes through the same grant checks.
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_done: Box<dyn std::future::Future<Output = Result<(), Error>> + Send>,
    ) -> Box<
        dyn std::future::Future<
                Output = Result<
                    (http::Response<WasiBody>, Box<dyn std::future::Future<Output = Result<(), Error>> + Send>),
                    Error,
                >,
            > + Send,
    > {
        let outbound = self.clone();
        Box::new(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let response = outbound.send(http::Request::from_parts(parts, body), options).await?;
            Ok((response, Box::new(async { Ok(()) }) as Box<dyn std::future::Future<Output = _> + Send>))
        })
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        BODY_WRITES_BUFFERED
    }
}

#[cfg(test)]
mod tests;
