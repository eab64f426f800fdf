//! The HTTP transport against a real receiver on 127.0.0.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};

use super::*;
use crate::contract::FailureKind;
use crate::trace::TraceParent;
use crate::transport::tests::message;
use crate::transport::Delivery;

#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A receiver: `/status/{code}` answers that code (with `Retry-After: 7` on 429 and 503),
/// `/slow` answers after two seconds, `/big` answers 100 KiB, anything else 200 "OK".
async fn receiver() -> (String, Log) {
    let log: Log = Arc::default();
    async fn record(
        State(log): State<Log>,
        method: Method,
        uri: axum::http::Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> StatusCode {
        log.lock().unwrap().push(Seen { method, path: uri.path().to_owned(), headers, body });
        StatusCode::OK
    }
    async fn status(
        State(log): State<Log>,
        Path(code): Path<u16>,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> impl IntoResponse {
        log.lock().unwrap().push(Seen { method, path: format!("/status/{code}"), headers, body });
        let status = StatusCode::from_u16(code).unwrap();
        let mut response = (status, format!("status {code}")).into_response();
        if code == 429 || code == 503 {
            response.headers_mut().insert("retry-after", "7".parse().unwrap());
        }
        response
    }
    let app = Router::new()
        .route("/status/{code}", any(status))
        .route(
            "/slow",
            any(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late"
            }),
        )
        .route("/big", any(|| async { "x".repeat(100 * 1024) }))
        .fallback(any(
            |state: State<Log>, method: Method, uri: axum::http::Uri, headers: HeaderMap, body: Bytes| async move {
                record(state, method, uri, headers, body).await;
                "OK"
            },
        ))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), log)
}

fn spec(url: String, extra: Value) -> Value {
    let mut spec = json!({"url": url, "method": "POST"});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    normalize_spec(EndpointType::Http, &spec).unwrap()
}

#[tokio::test]
async fn delivers_method_headers_and_body_byte_for_byte() {
    let (base, log) = receiver().await;
    let body = json!({"user_id": "u_abc", "amount": 12.5, "nested": {"list": [1, "two", null]}, "unicode": "héllo ✓"});
    let spec = spec(
        format!("{base}/emails/welcome?x=1"),
        json!({
            "headers": {"Authorization": "Bearer sk-live-abc", "X-Custom": "value"},
            "body_template": body,
        }),
    );
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let traced = Delivery::traced(TraceParent::parse(trace));
    let receipt = HttpTransport::new().deliver(message("exec_123", &spec), &traced).await.unwrap();
    let output: Value = serde_json::from_str(&receipt.output_json).unwrap();
    assert_eq!(output, json!({"status_code": 200, "body": "OK"}));

    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.method, Method::POST);
    assert_eq!(seen.path, "/emails/welcome");
    assert_eq!(seen.body, serde_json::to_vec(&body).unwrap(), "body byte for byte");
    assert_eq!(seen.headers["authorization"], "Bearer sk-live-abc");
    assert_eq!(seen.headers["x-custom"], "value");
    assert_eq!(seen.headers["idempotency-key"], "exec_123");
    assert_eq!(seen.headers["traceparent"], trace);
    assert_eq!(seen.headers["content-type"], "application/json");
    assert!(seen.headers["user-agent"].to_str().unwrap().starts_with("taskexec/"));
}

#[tokio::test]
async fn the_spec_may_set_its_own_idempotency_key_and_traceparent_and_a_get_has_no_body() {
    let (base, log) = receiver().await;
    let mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let mut s = spec(format!("{base}/hook"), json!({"headers": {"Idempotency-Key": "mine", "traceparent": mine}}));
    s["method"] = json!("GET");
    let traced = Delivery::traced(TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    HttpTransport::new().deliver(message("exec_1", &s), &traced).await.unwrap();
    let seen = log.lock().unwrap()[0].clone();
    assert_eq!(seen.method, Method::GET);
    assert_eq!(seen.headers.get_all("idempotency-key").iter().collect::<Vec<_>>(), ["mine"]);
    assert_eq!(seen.headers.get_all("traceparent").iter().collect::<Vec<_>>(), [mine]);
    assert!(seen.headers.get("content-type").is_none());
    assert!(seen.body.is_empty());
}

#[tokio::test]
async fn credentials_in_the_url_are_sent_as_basic_authorization_and_a_spec_may_name_its_user_agent() {
    let (base, log) = receiver().await;
    let with_credentials = base.replacen("http://", "http://ops%40acme:s%3Acret@", 1);
    let s = spec(format!("{with_credentials}/hook?q=1"), json!({"headers": {"User-Agent": "acme-hooks/2"}}));
    HttpTransport::new().deliver(message("exec_1", &s), &Delivery::default()).await.unwrap();
    let seen = log.lock().unwrap()[0].clone();
    // base64("ops@acme:s:cret"): percent-decoded, as browsers and curl send them.
    assert_eq!(seen.headers["authorization"], "Basic b3BzQGFjbWU6czpjcmV0");
    assert_eq!(seen.headers["host"], base.trim_start_matches("http://"), "no credentials in the Host header");
    assert_eq!(seen.path, "/hook");
    assert_eq!(seen.headers.get_all("user-agent").iter().collect::<Vec<_>>(), ["acme-hooks/2"]);

    // A spec's own Authorization header wins over credentials in its URL.
    let s = spec(format!("{with_credentials}/hook"), json!({"headers": {"Authorization": "Bearer mine"}}));
    HttpTransport::new().deliver(message("exec_2", &s), &Delivery::default()).await.unwrap();
    let seen = log.lock().unwrap()[1].clone();
    assert_eq!(seen.headers.get_all("authorization").iter().collect::<Vec<_>>(), ["Bearer mine"]);
}

#[tokio::test]
async fn statuses_are_judged_by_the_expected_codes() {
    let (base, _log) = receiver().await;
    let transport = HttpTransport::new();
    // 202 is expected by default; 201 is not when the spec narrows the list.
    assert!(transport
        .deliver(message("e", &spec(format!("{base}/status/202"), json!({}))), &Delivery::default())
        .await
        .is_ok());
    let narrowed = spec(format!("{base}/status/201"), json!({"expected_status_codes": [200]}));
    assert!(matches!(
        transport.deliver(message("e", &narrowed), &Delivery::default()).await.unwrap_err().kind,
        FailureKind::Rejected(Some(201))
    ));

    for (code, retryable) in [
        (400, false),
        (401, false),
        (404, false),
        (409, false),
        (408, true),
        (429, true),
        (500, true),
        (502, true),
        (503, true),
    ] {
        let failure = transport
            .deliver(message("e", &spec(format!("{base}/status/{code}"), json!({}))), &Delivery::default())
            .await
            .unwrap_err();
        assert_eq!(failure.kind, FailureKind::Rejected(Some(code)), "{code}");
        assert_eq!(failure.retryable, retryable, "{code}");
        assert!(failure.message.contains(&format!("status {code}")), "the body is quoted: {}", failure.message);
        let expected_retry_after = (code == 429 || code == 503).then_some(7000);
        assert_eq!(failure.retry_after_ms, expected_retry_after, "{code}");
        let error = transport.error_json(&failure);
        assert_eq!(error["type"], "HTTP_ERROR");
        assert_eq!(error["status_code"], code);
    }
}

#[tokio::test]
async fn a_slow_receiver_times_out() {
    let (base, _log) = receiver().await;
    let transport = HttpTransport::new();
    let started = std::time::Instant::now();
    let failure = transport
        .deliver(message("e", &spec(format!("{base}/slow"), json!({"timeout_ms": 200}))), &Delivery::default())
        .await
        .unwrap_err();
    assert_eq!((failure.kind, failure.retryable), (FailureKind::Timeout, true));
    assert!(started.elapsed() < Duration::from_millis(1900), "gave up at the timeout, not the response");
    assert_eq!(transport.error_json(&failure)["type"], "TIMEOUT");

    // A message whose deadline has passed is not sent at all.
    let mut late = message("e", &spec(format!("{base}/ok"), json!({})));
    late.deadline_ms = 1;
    assert_eq!(transport.deliver(late, &Delivery::default()).await.unwrap_err().kind, FailureKind::Timeout);
}

#[tokio::test]
async fn a_receiver_whose_body_stalls_times_out_at_the_same_deadline() {
    let addr = crate::transport::tests::stalling_receiver().await;
    let failure = tokio::time::timeout(
        Duration::from_secs(10),
        HttpTransport::new()
            .deliver(message("e", &spec(format!("http://{addr}/"), json!({"timeout_ms": 200}))), &Delivery::default()),
    )
    .await
    .expect("the body's read outlasted the timeout")
    .unwrap_err();
    assert_eq!((failure.kind, failure.retryable), (FailureKind::Timeout, true));
}

#[tokio::test]
async fn an_unreachable_receiver_is_a_connection_error() {
    // Bind and drop to find a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let transport = HttpTransport::new();
    let failure = transport
        .deliver(
            message("e", &spec(format!("http://127.0.0.1:{port}/x?token=sk-in-query"), json!({}))),
            &Delivery::default(),
        )
        .await
        .unwrap_err();
    assert_eq!((failure.kind, failure.retryable), (FailureKind::Connection, true));
    assert!(!failure.message.contains("sk-in-query"), "the URL is not quoted: {}", failure.message);
    assert_eq!(transport.error_json(&failure)["type"], "CONNECTION_ERROR");
}

#[tokio::test]
async fn a_large_body_is_truncated_in_the_output() {
    let (base, _log) = receiver().await;
    let receipt = HttpTransport::new()
        .deliver(message("e", &spec(format!("{base}/big"), json!({}))), &Delivery::default())
        .await
        .unwrap();
    let output: Value = serde_json::from_str(&receipt.output_json).unwrap();
    assert_eq!(output["body"].as_str().unwrap().len(), OUTPUT_BODY_LIMIT);
    assert_eq!(output["body_truncated"], true);
}

#[tokio::test]
async fn a_header_that_renders_badly_is_an_invalid_spec_and_not_quoted() {
    let (base, log) = receiver().await;
    // Registration refuses such a literal; a template can still render to one.
    let mut s = spec(format!("{base}/x"), json!({}));
    s["headers"] = json!({"X-Key": "line\nbreak-sk-secret"});
    let failure = HttpTransport::new().deliver(message("e", &s), &Delivery::default()).await.unwrap_err();
    assert_eq!((failure.kind, failure.retryable), (FailureKind::InvalidSpec, false));
    assert!(!failure.message.contains("sk-secret"));
    assert!(log.lock().unwrap().is_empty(), "nothing was sent");
}
