//! The Redis Streams transport against the real Redis server on 127.0.0.1:6379.

use redis::AsyncCommands;
use serde_json::{json, Value};

use super::*;
use crate::contract::FailureKind;
use crate::transport::tests::message;
use crate::transport::DeliveryLog;

const REDIS_URL: &str = "redis://127.0.0.1:6379";

fn unique_stream(prefix: &str) -> String {
    format!("taskexec-test:{prefix}:{}", uuid::Uuid::new_v4().simple())
}

fn spec(stream: &str, extra: Value) -> Value {
    let mut spec = json!({"redis_url": REDIS_URL, "stream": stream});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    normalize_spec(EndpointType::RedisStream, &spec).unwrap()
}

async fn connection() -> redis::aio::MultiplexedConnection {
    redis::Client::open(REDIS_URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("Redis runs on 127.0.0.1:6379 (scripts/test starts it)")
}

#[tokio::test]
async fn xadds_the_fields_and_reads_back_with_xrange() {
    let stream = unique_stream("xadd");
    let s = spec(
        &stream,
        json!({"fields_template": {"user_id": "u_abc", "title": "Weekly", "count": 3, "meta": {"a": [1, 2]}}}),
    );
    let transport = RedisStreamTransport::new();
    let receipt = transport.deliver(message("exec_redis_1", &s), &DeliveryLog::default()).await.unwrap();
    let output: Value = serde_json::from_str(&receipt.output_json).unwrap();
    assert_eq!(output["stream"], stream);

    let mut con = connection().await;
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1);
    let (id, fields) = &entries[0];
    assert_eq!(output["message_id"], id.as_str());
    let fields: std::collections::HashMap<_, _> = fields.iter().cloned().collect();
    assert_eq!(fields[EXECUTION_ID_FIELD], "exec_redis_1");
    assert_eq!(fields["user_id"], "u_abc");
    assert_eq!(fields["count"], "3", "non-strings are stored as JSON");
    assert_eq!(fields["meta"], r#"{"a":[1,2]}"#);
    let _: () = con.del(&stream).await.unwrap();
}

#[tokio::test]
async fn maxlen_trims_the_stream() {
    let stream = unique_stream("maxlen");
    // Exact trimming keeps exactly max_len entries.
    let exact = spec(&stream, json!({"fields_template": {"n": "x"}, "max_len": 5, "approximate_trimming": false}));
    let transport = RedisStreamTransport::new();
    for i in 0..12 {
        transport.deliver(message(&format!("exec_{i}"), &exact), &DeliveryLog::default()).await.unwrap();
    }
    let mut con = connection().await;
    let len: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut con).await.unwrap();
    assert_eq!(len, 5);
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    let ids: Vec<&str> =
        entries.iter().map(|(_, f)| f.iter().find(|(k, _)| k == EXECUTION_ID_FIELD).unwrap().1.as_str()).collect();
    assert_eq!(ids, ["exec_7", "exec_8", "exec_9", "exec_10", "exec_11"], "the newest survive");

    // A max_len that rendered to text (from a config value) works too; approximate trimming
    // never drops below the bound.
    let approx = spec(&stream, json!({"fields_template": {"n": "x"}, "max_len": "{{config.max}}"}));
    let mut rendered = approx.clone();
    rendered["max_len"] = json!("3");
    transport.deliver(message("exec_approx", &rendered), &DeliveryLog::default()).await.unwrap();
    let len: u64 = redis::cmd("XLEN").arg(&stream).query_async(&mut con).await.unwrap();
    assert!(len >= 3, "approximate trimming keeps at least max_len: {len}");
    let _: () = con.del(&stream).await.unwrap();
}

#[tokio::test]
async fn a_wrong_type_key_is_a_stream_error_that_is_not_retried() {
    let key = unique_stream("wrongtype");
    let mut con = connection().await;
    let _: () = con.set(&key, "not a stream").await.unwrap();
    let transport = RedisStreamTransport::new();
    let failure = transport
        .deliver(message("e", &spec(&key, json!({"fields_template": {"a": "b"}}))), &DeliveryLog::default())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::Rejected(None));
    assert!(!failure.retryable);
    assert!(failure.message.contains("WRONGTYPE"), "{}", failure.message);
    assert_eq!(transport.error_json(&failure)["type"], "STREAM_ERROR");
    let _: () = con.del(&key).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_a_connection_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut s = spec("s", json!({"fields_template": {"a": "b"}}));
    s["redis_url"] = json!(format!("redis://:hunter2-pw@127.0.0.1:{port}"));
    let transport = RedisStreamTransport::new();
    let failure = transport.deliver(message("e", &s), &DeliveryLog::default()).await.unwrap_err();
    assert!(matches!(failure.kind, FailureKind::Connection | FailureKind::Timeout), "{failure:?}");
    assert!(failure.retryable);
    assert!(!failure.message.contains("hunter2"), "{}", failure.message);
    assert_eq!(
        transport.error_json(&failure)["type"].as_str().map(|t| t == "CONNECTION_ERROR" || t == "TIMEOUT"),
        Some(true)
    );
}
