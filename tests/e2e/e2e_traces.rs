//! Traces: the create request's W3C trace context reaches the receiver, and with an OTLP
//! endpoint set the request and attempt spans are exported as one trace.

use std::time::Duration;

use serde_json::json;

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::otlp::{OtlpReceiver, ReceivedSpan};
use crate::support::server::API_KEY;
use crate::support::{wait_for, Backend, Receiver, Server, ServerOptions, TestDb};

both_backends!(a_delivery_continues_the_trace_of_the_request_that_created_its_job);

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// `(trace id, parent id)` of a `traceparent` value, checked for its W3C shape.
fn parts(traceparent: &str) -> (String, String) {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    assert_eq!((fields[0], fields[1].len(), fields[2].len(), fields[3].len()), ("00", 32, 16, 2), "{traceparent}");
    (fields[1].to_owned(), fields[2].to_owned())
}

async fn a_delivery_continues_the_trace_of_the_request_that_created_its_job(backend: Backend) {
    let db = TestDb::new(backend).await;
    let collector = OtlpReceiver::start().await;
    let server = Server::start_with(
        &db,
        ServerOptions::new()
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.base_url)
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            // Log lines of the API only: the worker's spans are made and exported whatever
            // TE_LOG leaves out.
            .env("TE_LOG", "warn,taskexec::cli=info"),
    )
    .await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "traced", "/ok/traced", json!(null)).await;

    // A caller that traces sends its context with the create request.
    let created: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/jobs", server.base_url))
        .bearer_auth(API_KEY)
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&immediate("traced", "t-1", json!({"user_id": "u", "amount": 1})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job_id = created["job_id"].as_str().unwrap().to_owned();
    let execution_id = created["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &execution_id, "SUCCESS").await;
    let delivered = receiver.received().into_iter().find(|r| r.path == "/ok/traced").unwrap();
    let (trace, attempt_span) = parts(&delivered.header("traceparent").expect("a traceparent header"));
    assert_eq!(trace, CALLER_TRACE, "the delivery is in the caller's trace");
    assert_ne!(attempt_span, CALLER_SPAN, "the receiver's parent is the attempt, not the caller");

    // Exported: the request span (child of the caller's), and the attempt span (child of the
    // request's), whose id is the parent the receiver was given.
    let in_trace = |name: &str| -> Option<ReceivedSpan> {
        collector.spans().into_iter().find(|s| s.trace_id == CALLER_TRACE && s.name == name)
    };
    wait_for("the request and attempt spans at the collector", Duration::from_secs(20), || {
        in_trace("request").is_some() && in_trace("attempt").is_some()
    })
    .await;
    let request = in_trace("request").unwrap();
    let attempt = in_trace("attempt").unwrap();
    assert_eq!(request.parent_span_id, CALLER_SPAN);
    assert_eq!(request.attributes["job_id"], job_id, "{request:?}");
    assert_eq!(request.attributes["path"], "/jobs", "{request:?}");
    assert_eq!(attempt.parent_span_id, request.span_id, "{attempt:?}");
    assert_eq!(attempt.span_id, attempt_span);
    assert_eq!(attempt.attributes["execution_id"], execution_id, "{attempt:?}");
    assert_eq!(attempt.attributes["job_id"], job_id, "{attempt:?}");
    assert_eq!(attempt.attributes["attempt"], "1", "{attempt:?}");
    assert_eq!(attempt.service, "taskexec");

    // A caller that does not trace still gets a trace of its own per job, carried the same way.
    let untraced = api.create("/jobs", &immediate("traced", "t-2", json!({"user_id": "u", "amount": 2}))).await;
    wait_for_status(&api, untraced["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let second = receiver.received().into_iter().filter(|r| r.path == "/ok/traced").nth(1).unwrap();
    let (other_trace, _) = parts(&second.header("traceparent").expect("a traceparent header"));
    assert_ne!(other_trace, CALLER_TRACE);
    wait_for("the untraced request's attempt span", Duration::from_secs(20), || {
        collector.spans().iter().any(|s| s.trace_id == other_trace && s.name == "attempt")
    })
    .await;
}
