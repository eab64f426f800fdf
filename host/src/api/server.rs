//! The HTTP server under the API and the health routes: hyper's HTTP/1 connections with a
//! header-read timeout, at most a set number of connections at once, and a graceful shutdown
//! that lets the requests in flight finish.
//!
//! axum's own `serve` builds hyper connections without a timer, so hyper's header-read timeout
//! never fires there: a client dripping its request head a byte at a time (slowloris) would hold
//! a connection, and a file descriptor, for as long as it liked.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// What one server allows its clients.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// How long a client may take to send a request's head (`TE_HEADER_READ_TIMEOUT_SEC`).
    pub header_read_timeout: Duration,
    /// Connections served at once (`TE_MAX_CONNECTIONS`); more wait in the listen backlog.
    pub max_connections: usize,
}

/// Serve `app` on `listener` until `shutdown` completes, then stop accepting, let every
/// connection finish its request in flight, and return.
pub async fn serve(listener: TcpListener, app: Router, limits: ServerLimits, shutdown: impl Future<Output = ()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Dropped at shutdown: every connection then finishes what it is serving and closes.
    let (closing, closed) = tokio::sync::watch::channel(());
    let mut connections = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    tracing::warn!(%error, "Accepting a connection failed.");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service =
            TowerToHyperService::new(app.clone().map_request(|request: Request<Incoming>| request.map(Body::new)));
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
            drop(slot);
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    drop(closing);
    while connections.join_next().await.is_some() {}
}
