//! The HTTP transport's own HTTP/1.1 client: while a receiver takes its time, a delivery holds
//! its socket and nothing else.
//!
//! Why not hyper's client, as the transport used before (to 81a6140): every delivery in flight
//! holds a connection of its own, and a hyper connection holds a request channel (a tokio mpsc
//! block of 32 envelopes, ~9 KiB), an 8 KiB header write buffer, its read buffer, its
//! connection task and hyper-util's boxed request future — ~15 KiB a delivery waiting on a slow
//! receiver, most of a worker's memory at 10,000 in flight (docs/benchmarks.md). Here the
//! request is written from one buffer that is freed before the wait (kept only while a reused
//! connection may need to send it again), the read buffer is allocated once the answer starts
//! to arrive, and the delivery's own future drives the socket: no task and no channel per
//! connection. What a delivery needs of HTTP/1.1 is small and done here with httparse for the
//! response head: `Content-Length`, chunked and close-delimited bodies, interim 1xx answers,
//! keep-alive reuse, and limits on everything a receiver sends.
//!
//! Plugins' requests still go through hyper-util (`client.rs`): they stream bodies both ways.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::header::{HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, USER_AGENT};
use hyper::Method;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;

use super::client::{authorize_from_url, BoxError, Resolve, POOL_IDLE_TIMEOUT, POOL_MAX_IDLE_PER_HOST};

mod answer;

#[doc(hidden)]
pub use answer::read_answer_bytes;
use answer::{has_token, read_answer};

/// Sent unless the endpoint's spec sets its own.
const DEFAULT_USER_AGENT: &str = concat!("taskexec/", env!("CARGO_PKG_VERSION"));
/// How often idle connections past their time are closed.
const POOL_REAP_EVERY: Duration = Duration::from_secs(30);
/// The most header fields an answer may have (hyper's limit too).
const MAX_HEADERS: usize = 100;
/// The most bytes an answer's head (status line and header fields), a chunk-size line or a
/// chunked body's trailer section may take.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8 * 1024;

/// A request as the transport sends it.
pub struct Outgoing {
    pub method: Method,
    pub url: url::Url,
    pub headers: HeaderMap,
    pub body: Option<Vec<u8>>,
}

/// A response with its body read (up to a limit).
#[derive(Debug)]
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
    Failed(BoxError),
}

/// What went wrong on the wire. The messages never quote the URL (its query may carry a
/// rendered secret) nor a header's value.
#[derive(Debug, thiserror::Error)]
enum WireError {
    #[error("the URL has no host")]
    NoHost,
    #[error("dns error")]
    Resolve(#[source] BoxError),
    #[error("tcp connect error")]
    Connect(#[source] io::Error),
    #[error("TLS handshake failed")]
    Tls(#[source] io::Error),
    #[error("the request could not be sent")]
    Write(#[source] io::Error),
    #[error("the response could not be read")]
    Read(#[source] io::Error),
    #[error("the connection closed before the response was complete")]
    Incomplete,
    #[error("the response's head is not valid HTTP/1.1 ({0})")]
    Malformed(httparse::Error),
    #[error("the response's head is too large: more than {MAX_HEADERS} header fields")]
    TooManyHeaders,
    #[error("the response's head is too large: more than {MAX_HEAD_BYTES} bytes")]
    HeadTooLarge,
    #[error("the response's body is framed wrongly: {0}")]
    Framing(&'static str),
    #[error("the receiver switched protocols (101), which a delivery does not speak")]
    SwitchedProtocols,
}

/// Where a connection goes; idle connections are kept per origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Origin {
    tls: bool,
    host: url::Host<String>,
    port: u16,
}

/// A request encoded for the wire.
struct Encoded {
    origin: Origin,
    /// A HEAD request's answer has no body, whatever its head says.
    head_only: bool,
    /// The request asked the receiver to close the connection after answering.
    close: bool,
    bytes: Vec<u8>,
}

/// An HTTP/1.1 client with a keep-alive pool per origin.
#[derive(Clone)]
pub struct H1Client {
    inner: Arc<Inner>,
}

struct Inner {
    resolver: Box<dyn Resolve>,
    tls: tokio_rustls::TlsConnector,
    idle: Mutex<HashMap<Origin, Vec<Idle>>>,
    reaper: Once,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

impl H1Client {
    /// Connects only to addresses `resolver` returns (an address in a URL is never resolved:
    /// the caller checks it), over TLS verified against the webpki roots for https. No proxy
    /// and no redirects: a redirect is an answer, judged like any status.
    pub fn new(resolver: impl Resolve) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Self::with_roots(resolver, roots)
    }

    fn with_roots(resolver: impl Resolve, roots: rustls::RootCertStore) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let inner = Inner {
            resolver: Box::new(resolver),
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            idle: Mutex::default(),
            reaper: Once::new(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Send `outgoing` with a `User-Agent` unless it has one, credentials in the URL as Basic
    /// authorization, and read at most `body_limit` bytes of the answer's body, all within
    /// `timeout`.
    ///
    /// A plain function: the request is encoded before anything is awaited, so the future held
    /// while the receiver answers keeps the encoded bytes only (and those only while they may
    /// have to go again), not the request they were made from.
    pub fn send(
        &self,
        outgoing: Outgoing,
        timeout: Duration,
        body_limit: usize,
    ) -> impl Future<Output = Result<Answer, SendError>> + Send + '_ {
        let encoded = encode(outgoing);
        async move {
            let Encoded { origin, head_only, close, bytes } = encoded.map_err(|e| SendError::Failed(Box::new(e)))?;
            match tokio::time::timeout(timeout, self.exchange(origin, head_only, close, bytes, body_limit)).await {
                Ok(answer) => answer.map_err(|e| SendError::Failed(Box::new(e))),
                Err(_) => Err(SendError::Timeout),
            }
        }
    }

    async fn exchange(
        &self,
        origin: Origin,
        head_only: bool,
        close: bool,
        bytes: Vec<u8>,
        limit: usize,
    ) -> Result<Answer, WireError> {
        // Kept while a reused connection may fail before answering and the request must go
        // again on a new one; freed before a new connection's wait.
        let mut bytes = Some(bytes);
        loop {
            let (mut conn, reused) = match self.inner.take(&origin) {
                Some(conn) => (conn, true),
                // Boxed: a TLS handshake's state is large, and only lives while connecting.
                None => (Box::pin(self.inner.connect(&origin)).await?, false),
            };
            let sent = match conn.write_all(bytes.as_deref().expect("kept until sent for good")).await {
                Ok(()) => conn.flush().await,
                Err(e) => Err(e),
            };
            if !reused {
                bytes = None;
            }
            // A receiver may close an idle connection just as a request goes out on it, and
            // then it has not read the request: send it again, on a new connection. (A crash
            // after reading it looks the same; the worker would retry that attempt anyway.)
            let first = match sent {
                Ok(()) => conn.read_first().await,
                Err(_) if reused => continue,
                Err(e) => return Err(WireError::Write(e)),
            };
            let first = match first {
                Ok(first) if !first.is_empty() => first,
                Ok(_) | Err(_) if reused => continue,
                Ok(_) => return Err(WireError::Incomplete),
                Err(e) => return Err(WireError::Read(e)),
            };
            drop(bytes);
            // Boxed: reading the answer takes more state than waiting for it, and this future
            // is held for as long as the receiver takes to start answering.
            let (answer, reusable) = Box::pin(read_answer(conn, first, head_only, limit)).await?;
            if let (Some(conn), false) = (reusable, close) {
                self.inner.put(origin, conn);
            }
            return Ok(answer);
        }
    }
}

impl Inner {
    /// The most recently used idle connection to `origin` that is still open.
    fn take(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.lock().expect("the pool's lock is never poisoned");
        let waiting = idle.get_mut(origin)?;
        let mut found = None;
        while let Some(Idle { mut conn, since }) = waiting.pop() {
            if since.elapsed() < POOL_IDLE_TIMEOUT && conn.is_open() {
                found = Some(conn);
                break;
            }
        }
        if waiting.is_empty() {
            idle.remove(origin);
        }
        found
    }

    fn put(self: &Arc<Self>, origin: Origin, conn: Conn) {
        self.reaper.call_once(|| {
            tokio::spawn(reap(Arc::downgrade(self)));
        });
        let mut idle = self.idle.lock().expect("the pool's lock is never poisoned");
        let waiting = idle.entry(origin).or_default();
        if waiting.len() < POOL_MAX_IDLE_PER_HOST {
            waiting.push(Idle { conn, since: Instant::now() });
        }
    }

    async fn connect(&self, origin: &Origin) -> Result<Conn, WireError> {
        let addresses = match &origin.host {
            url::Host::Ipv4(ip) => vec![SocketAddr::new(IpAddr::V4(*ip), origin.port)],
            url::Host::Ipv6(ip) => vec![SocketAddr::new(IpAddr::V6(*ip), origin.port)],
            url::Host::Domain(name) => {
                let resolved = self.resolver.resolve(name).await.map_err(WireError::Resolve)?;
                resolved.into_iter().map(|a| SocketAddr::new(a.ip(), origin.port)).collect()
            }
        };
        // In the resolver's order; the delivery's deadline bounds the whole walk.
        let mut failed = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
        let mut stream = None;
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(e) => failed = e,
            }
        }
        let stream = stream.ok_or(WireError::Connect(failed))?;
        stream.set_nodelay(true).map_err(WireError::Connect)?;
        if !origin.tls {
            return Ok(Conn::Plain(stream));
        }
        let name = match &origin.host {
            url::Host::Ipv4(ip) => ServerName::IpAddress(IpAddr::V4(*ip).into()),
            url::Host::Ipv6(ip) => ServerName::IpAddress(IpAddr::V6(*ip).into()),
            url::Host::Domain(name) => ServerName::try_from(name.clone())
                .map_err(|e| WireError::Tls(io::Error::new(io::ErrorKind::InvalidInput, e)))?,
        };
        let tls = self.tls.connect(name, stream).await.map_err(WireError::Tls)?;
        Ok(Conn::Tls(Box::new(tls)))
    }
}

/// Close idle connections past their time, until the client is dropped.
async fn reap(pool: Weak<Inner>) {
    let mut every = tokio::time::interval(POOL_REAP_EVERY);
    loop {
        every.tick().await;
        let Some(inner) = pool.upgrade() else { return };
        let mut idle = inner.idle.lock().expect("the pool's lock is never poisoned");
        idle.retain(|_, waiting| {
            waiting.retain(|i| i.since.elapsed() < POOL_IDLE_TIMEOUT);
            !waiting.is_empty()
        });
    }
}

/// The request's bytes: request line, `Host`, the headers (the framing ones are ours), a
/// `Content-Length` for a body or a method that takes one, and the body.
fn encode(outgoing: Outgoing) -> Result<Encoded, WireError> {
    let Outgoing { method, url, mut headers, body } = outgoing;
    let host = url.host().ok_or(WireError::NoHost)?.to_owned();
    let port = url.port_or_known_default().ok_or(WireError::NoHost)?;
    let origin = Origin { tls: url.scheme() == "https", host, port };
    if !headers.contains_key(USER_AGENT) {
        headers.insert(USER_AGENT, HeaderValue::from_static(DEFAULT_USER_AGENT));
    }
    // Never in the request's target or `Host`, which are written from the URL's path and host.
    authorize_from_url(&url, &mut headers);
    let close = headers.get_all(CONNECTION).iter().any(|v| has_token(v, "close"));
    let body = body.unwrap_or_default();
    let sized = headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>();
    let mut bytes = Vec::with_capacity(64 + url.as_str().len() + sized + body.len());
    bytes.extend_from_slice(method.as_str().as_bytes());
    bytes.push(b' ');
    bytes.extend_from_slice(url.path().as_bytes());
    if let Some(query) = url.query() {
        bytes.push(b'?');
        bytes.extend_from_slice(query.as_bytes());
    }
    bytes.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(HOST) {
        bytes.extend_from_slice(b"host: ");
        bytes.extend_from_slice(url.host_str().unwrap_or_default().as_bytes());
        if let Some(port) = url.port() {
            write!(bytes, ":{port}").expect("writing to a Vec cannot fail");
        }
        bytes.extend_from_slice(b"\r\n");
    }
    for (name, value) in &headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        bytes.extend_from_slice(name.as_str().as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    // Receivers (nginx among them) refuse a POST with no length with 411.
    if !body.is_empty() || matches!(method, Method::POST | Method::PUT | Method::PATCH) {
        write!(bytes, "content-length: {}\r\n", body.len()).expect("writing to a Vec cannot fail");
    }
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&body);
    Ok(Encoded { origin, head_only: method == Method::HEAD, close, bytes })
}

/// A connection to a receiver.
enum Conn {
    Plain(TcpStream),
    // Boxed: rustls's state is ~1 KiB, and most receivers are plain HTTP on a private network.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    /// The answer's first bytes (none when the receiver closed the connection). A plain
    /// socket's buffer is allocated once it has something to read, not while it waits.
    async fn read_first(&mut self) -> io::Result<Vec<u8>> {
        if let Conn::Plain(stream) = self {
            stream.readable().await?;
        }
        let mut first = Vec::with_capacity(READ_CHUNK);
        self.read_buf(&mut first).await?;
        Ok(first)
    }

    /// An idle connection is still open when it has nothing to read: a receiver that closed it
    /// (or sent something unasked) makes it unusable.
    fn is_open(&mut self) -> bool {
        // Asked of the socket itself: tokio's readiness for it is only as fresh as the last
        // time the runtime's driver polled.
        let socket = match &*self {
            Conn::Plain(stream) => stream.as_fd(),
            Conn::Tls(stream) => stream.get_ref().0.as_fd(),
        };
        match peek(socket) {
            Peeked::Nothing => true,
            Peeked::Closed => false,
            // A TLS receiver's records (a session ticket, a close alert) may carry no data:
            // let rustls read what is there without waiting.
            Peeked::Bytes if matches!(self, Conn::Tls(_)) => {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                let mut byte = [0u8; 1];
                let mut buf = ReadBuf::new(&mut byte);
                matches!(Pin::new(self).poll_read(&mut cx, &mut buf), Poll::Pending)
            }
            Peeked::Bytes => false,
        }
    }
}

enum Peeked {
    Nothing,
    Bytes,
    Closed,
}

/// What a nonblocking socket has to read, left unread.
fn peek(socket: std::os::fd::BorrowedFd<'_>) -> Peeked {
    let mut byte = 0u8;
    // SAFETY: one byte into a valid local buffer, on a descriptor borrowed for the call.
    let read =
        unsafe { libc::recv(socket.as_raw_fd(), (&raw mut byte).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    match read {
        1.. => Peeked::Bytes,
        0 => Peeked::Closed,
        _ if io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock => Peeked::Nothing,
        _ => Peeked::Closed,
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_write(cx, data),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Conn::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
