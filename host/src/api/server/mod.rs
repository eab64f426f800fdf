//! The HTTP server under the API, the dashboard and the health routes: hyper's HTTP/1
//! connections, each request bounded in time, connections capped in total and per client
//! address, and a graceful shutdown that lets the requests in flight finish.
//!
//! What bounds a client that will not finish (every bound a `TE_*` setting, see `ServerLimits`):
//! - its request head: hyper's header-read timeout (axum's own `serve` sets no timer, so it
//!   never fires there);
//! - its request body: one deadline for the whole body ([`body`]), answered `408`;
//! - the request as a whole, until the response's head: a total timeout, answered `408`;
//! - how many connections it holds: a cap per client address ([`clients`]) below the total cap,
//!   so one address dripping thousands of connections leaves room for everyone else.

mod body;
mod clients;

pub use body::is_deadline;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// The address a request came from, put in every request's extensions by the server (a client
/// cannot set it). Behind a proxy it is the proxy's.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::IpAddr);

/// What one server allows its clients.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// How long a client may take to send a request's head (`TE_HEADER_READ_TIMEOUT_SEC`).
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's whole body (`TE_BODY_READ_TIMEOUT_SEC`).
    pub body_read_timeout: Duration,
    /// How long a request may take until its response's head (`TE_REQUEST_TIMEOUT_SEC`).
    pub request_timeout: Duration,
    /// Connections served at once (`TE_MAX_CONNECTIONS`); more wait in the listen backlog.
    pub max_connections: usize,
    /// Connections one client address may hold (`TE_MAX_CONNECTIONS_PER_CLIENT`); more are
    /// closed as they arrive.
    pub max_connections_per_client: usize,
}

/// Serve `app` on `listener` until `shutdown` completes, then stop accepting, let every
/// connection finish its request in flight, and return.
pub async fn serve(listener: TcpListener, app: Router, limits: ServerLimits, shutdown: impl Future<Output = ()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let clients = clients::Clients::default();
    // Dropped at shutdown: every connection then finishes what it is serving and closes.
    let (closing, closed) = tokio::sync::watch::channel(());
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    tracing::warn!(%error, "Accepting a connection failed.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(client) = clients.admit(peer.ip(), limits.max_connections_per_client) else {
            // Dropped unanswered: the client already holds its share of the server.
            metrics::counter!(crate::metrics::CONNECTIONS_REFUSED, "reason" => "per_client").increment(1);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(bounded(app.clone(), limits, ClientAddr(peer.ip())));
        let mut closed = closed.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
            let connection = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
            let mut connection = pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "Connection ended with an error.");
                    }
                }
                _ = closed.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            // The client's place first: the connection the freed slot lets in may be its.
            drop(client);
            drop(slot);
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    drop(closing);
    while connections.join_next().await.is_some() {}
}

/// `app` with each request's body given its deadline and the whole request its timeout, and
/// the client's address in its extensions.
fn bounded(
    app: Router,
    limits: ServerLimits,
    client: ClientAddr,
) -> impl tower::Service<
    Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    tower::service_fn(move |request: Request<Incoming>| {
        let app = app.clone();
        async move {
            let mut request = request.map(|b| body::with_deadline(b, limits.body_read_timeout));
            request.extensions_mut().insert(client);
            match tokio::time::timeout(limits.request_timeout, app.oneshot(request)).await {
                Ok(response) => response,
                Err(_) => Ok(timed_out(limits.request_timeout)),
            }
        }
    })
}

fn timed_out(limit: Duration) -> axum::response::Response {
    use crate::api::error::{ApiError, ErrorCode};
    use axum::response::IntoResponse;
    ApiError::new(
        ErrorCode::RequestTimeout,
        format!("The request took longer than the server allows ({}s, TE_REQUEST_TIMEOUT_SEC).", limit.as_secs()),
    )
    .into_response()
}
