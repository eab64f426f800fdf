//! The Redis Streams transport against the real Redis server on 127.0.0.1:6379.

use redis::AsyncCommands;
use serde_json::{json, Value};

use super::*;
use crate::contract::FailureKind;
use crate::trace::TraceParent;
use crate::transport::tests::message;
use crate::transport::Delivery;

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
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let receipt =
        transport.deliver(message("exec_redis_1", &s), &Delivery::traced(TraceParent::parse(trace))).await.unwrap();
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
    assert_eq!(fields["traceparent"], trace, "the attempt's trace context");
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
        transport.deliver(message(&format!("exec_{i}"), &exact), &Delivery::default()).await.unwrap();
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
    transport.deliver(message("exec_approx", &rendered), &Delivery::default()).await.unwrap();
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
        .deliver(message("e", &spec(&key, json!({"fields_template": {"a": "b"}}))), &Delivery::default())
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
    let failure = transport.deliver(message("e", &s), &Delivery::default()).await.unwrap_err();
    assert!(matches!(failure.kind, FailureKind::Connection | FailureKind::Timeout), "{failure:?}");
    assert!(failure.retryable);
    assert!(!failure.message.contains("hunter2"), "{}", failure.message);
    assert_eq!(
        transport.error_json(&failure)["type"].as_str().map(|t| t == "CONNECTION_ERROR" || t == "TIMEOUT"),
        Some(true)
    );
}

/// A server whose accept queue is full: a connection to it hangs in the TCP handshake, as to a
/// host that drops packets. Returns its address and the listener (keep it alive).
async fn blackhole() -> (std::net::SocketAddr, tokio::net::TcpListener, Vec<tokio::task::JoinHandle<()>>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // Fill the queue with connections nobody accepts.
    let fillers = (0..4)
        .map(|_| {
            tokio::spawn(async move {
                if let Ok(Ok(stream)) =
                    tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(addr)).await
                {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    drop(stream);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let probe = tokio::time::timeout(Duration::from_millis(300), tokio::net::TcpStream::connect(addr)).await;
    assert!(probe.is_err(), "a connection to a full accept queue should hang");
    (addr, listener, fillers)
}

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_holds_up_no_delivery_to_another() {
    let (addr, _listener, _fillers) = blackhole().await;
    let transport = std::sync::Arc::new(RedisStreamTransport::new());
    let mut hanging = spec("s", json!({"fields_template": {"a": "b"}, "timeout_ms": 4000}));
    hanging["redis_url"] = json!(format!("redis://{addr}"));
    let stuck = {
        let transport = transport.clone();
        tokio::spawn(async move { transport.deliver(message("e_stuck", &hanging), &Delivery::default()).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!stuck.is_finished(), "the delivery to the silent server is still connecting");
    let stream = unique_stream("beside-a-hang");
    let fine = spec(&stream, json!({"fields_template": {"a": "b"}}));
    let started = std::time::Instant::now();
    transport.deliver(message("e_fine", &fine), &Delivery::default()).await.unwrap();
    assert!(!stuck.is_finished(), "the other delivery went through while the first still hung");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
    let failure = stuck.await.unwrap().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Timeout, "{failure:?}");
    let _: () = connection().await.del(&stream).await.unwrap();
}

#[tokio::test]
async fn the_egress_policy_holds_for_every_spelling_of_the_server() {
    use std::sync::Arc;

    use crate::egress::EgressPolicy;
    let deny_loopback = Arc::new(EgressPolicy::parse(None, Some("127.0.0.0/8,::1/128")).unwrap());
    let transport = RedisStreamTransport::with_policy(deny_loopback);
    let stream = unique_stream("egress");
    for url in [
        "redis://127.0.0.1:6379",
        "redis://127.1:6379",
        "redis://2130706433:6379",
        "redis://0x7f000001:6379",
        "redis://localhost:6379",
        "redis://[::1]:6379",
        "unix:///tmp/redis.sock",
    ] {
        let mut s = spec(&stream, json!({"fields_template": {"a": "b"}}));
        s["redis_url"] = json!(url);
        let failure = transport.deliver(message("e", &s), &Delivery::default()).await.unwrap_err();
        assert_eq!(failure.kind, FailureKind::InvalidSpec, "{url}: {failure:?}");
        assert!(failure.message.contains("TE_EGRESS_DENY"), "{url}: {}", failure.message);
    }
    let exists: bool = connection().await.exists(&stream).await.unwrap();
    assert!(!exists, "nothing reached Redis");
}

/// A Redis server of the test's own listening with TLS only, its certificate signed by a CA the
/// test makes (openssl): the server is stopped when this is dropped.
struct TlsRedis {
    child: std::process::Child,
    port: u16,
    ca_pem: String,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
        let ca_pem = crate::transport::tests::make_certificates(dir.path());
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--tls-cert-file", &path("server.pem"), "--tls-key-file", &path("server.key")])
            .args(["--tls-ca-cert-file", &path("ca.pem"), "--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no", "--dir", dir.path().to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs (scripts/test installs it)");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(std::time::Instant::now() < deadline, "the TLS Redis did not listen on {port}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Self { child, port, ca_pem, _dir: dir }
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn rediss_delivers_over_tls_verified_against_the_spec_s_ca() {
    let server = TlsRedis::start().await;
    let url = format!("rediss://localhost:{}", server.port);
    let stream = unique_stream("tls");
    let transport = RedisStreamTransport::new();
    let tls_spec = |ca: Option<&str>| {
        let mut spec = json!({"redis_url": url, "stream": stream, "fields_template": {"n": 1}});
        if let Some(ca) = ca {
            spec["tls_ca_pem"] = json!(ca);
        }
        normalize_spec(EndpointType::RedisStream, &spec).unwrap()
    };

    // The system's roots do not know the test's CA: the server is not trusted.
    let refused = transport.deliver(message("exec_tls_0", &tls_spec(None)), &Delivery::default()).await.unwrap_err();
    assert!(refused.message.to_lowercase().contains("certificate"), "{refused:?}");

    let receipt =
        transport.deliver(message("exec_tls_1", &tls_spec(Some(&server.ca_pem))), &Delivery::default()).await.unwrap();
    let output: Value = serde_json::from_str(&receipt.output_json).unwrap();
    let certificates = redis::TlsCertificates { client_tls: None, root_cert: Some(server.ca_pem.clone().into_bytes()) };
    let mut con = redis::Client::build_with_tls(url.as_str(), certificates)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1, "the entry is on the TLS server");
    assert_eq!(output["message_id"], entries[0].0.as_str());

    // tls_ca_pem belongs to TLS URLs, and must be a certificate.
    let plain =
        json!({"redis_url": REDIS_URL, "stream": "s", "fields_template": {"n": 1}, "tls_ca_pem": server.ca_pem});
    assert_eq!(normalize_spec(EndpointType::RedisStream, &plain).unwrap_err().field, "spec.tls_ca_pem");
    let junk = json!({"redis_url": url, "stream": "s", "fields_template": {"n": 1}, "tls_ca_pem": "not a pem"});
    assert_eq!(normalize_spec(EndpointType::RedisStream, &junk).unwrap_err().field, "spec.tls_ca_pem");
}
