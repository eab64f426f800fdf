//! Request ids: one per request, in the `x-request-id` response header, in every error body and
//! in the request's log lines. A caller's own `x-request-id` is kept when it is a short token,
//! so ids can follow a request across services. The request's span continues the caller's W3C
//! `traceparent` when it sends one (see `crate::trace`).

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::trace::{TraceParent, TRACEPARENT};

pub const HEADER: &str = "x-request-id";

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled (`req_unknown` outside a request).
pub fn current() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_else(|_| "req_unknown".to_owned())
}

fn acceptable(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub async fn middleware(request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| acceptable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("req_{}", uuid::Uuid::new_v4().simple()));
    let method = request.method().clone();
    // The path only: a query string may carry a cursor or filter values not worth logging.
    let path = request.uri().path().to_owned();
    // `job_id` is filled in by the handlers that create or update a job, `tenant` by the
    // handlers that act within one (`api::auth`'s Scope).
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        %method,
        %path,
        tenant = tracing::field::Empty,
        job_id = tracing::field::Empty
    );
    // A caller that traces: this request, and the deliveries it causes, join its trace.
    if let Some(parent) = request.headers().get(TRACEPARENT).and_then(|v| v.to_str().ok()).and_then(TraceParent::parse)
    {
        parent.adopt(&span);
    }
    let started = std::time::Instant::now();
    let mut response = REQUEST_ID.scope(id.clone(), next.run(request)).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "Request handled."
        )
    });
    response.headers_mut().insert(HEADER, HeaderValue::from_str(&id).expect("request ids are ASCII tokens"));
    response
}
