//! A real HTTP receiver on 127.0.0.1 that records every request it gets.
//!
//! Paths: `/ok/…` answers 200 "OK"; `/fail/…` answers 500; `/flaky/{name}/{n}` answers 503 to
//! the first `n` requests for `name`, then 200; `/throttle/{name}/{n}/{secs}` answers 429 with
//! `Retry-After: secs` to the first `n` requests for `name`, then 200; `/switch/{name}` answers
//! 503 until the test calls `heal(name)`, then 200; `/slow-once/{name}/{ms}` holds its first
//! request for `ms` milliseconds, then answers 200 at once; `/slow/{ms}` holds every request
//! for `ms` milliseconds, then answers 200; `/echo/{status}` answers `status` with the
//! request's headers and body quoted back as JSON; `/nul-json` answers 200 with a JSON body
//! holding a raw NUL byte (`{"ok":"a<NUL>b"}`); `/nul-raw` answers 200 with the bytes
//! `ok\0` and an invalid UTF-8 byte; `/mirror` answers 200 with the request's body as its own
//! (a receiver whose answer the job's input decides); `/json-switch/{name}` answers 200 with
//! `{"ok": false, "error": "not yet"}` until the test calls `heal(name)`, then `{"ok": true}`;
//! `/hang/{name}` never answers, and counts (`hung_up(name)`) the requests whose sender closed
//! the connection while it held them; `/keyed/{ms}` takes a body `{"key", "seq", "fail_once"}`,
//! holds it `ms` milliseconds and answers 200 (503 to the first request of a `seq` with
//! `fail_once`), recording per key the order of `seq`s answered 200 (`keyed_order`) and the
//! most of its requests held at once (`keyed_most_at_once`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::routing::any;
use axum::Router;
use chrono::{DateTime, Utc};
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: DateTime<Utc>,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_owned())
    }
}

#[derive(Default)]
struct Inner {
    received: Mutex<Vec<Received>>,
    counters: Mutex<HashMap<String, u32>>,
    /// `/slow/…` requests being held now, and the most held at once.
    slow_now: Mutex<(usize, usize)>,
    /// The `/switch/…` names that answer 200.
    healed: Mutex<Vec<String>>,
    /// `/hang/{name}` requests whose sender went away, by name.
    hung_up: Mutex<HashMap<String, u32>>,
    /// `/keyed/…`, by key: its requests held now, the most at once, the `seq`s answered 200
    /// in order, and the `seq`s already failed once.
    keyed: Mutex<HashMap<String, Keyed>>,
}

#[derive(Default, Clone)]
struct Keyed {
    now: usize,
    most: usize,
    order: Vec<i64>,
    failed: Vec<i64>,
}

#[derive(Clone)]
pub struct Receiver {
    pub base_url: String,
    inner: Arc<Inner>,
}

impl Receiver {
    pub async fn start() -> Self {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .route("/flaky/{name}/{failures}", any(flaky))
            .route("/throttle/{name}/{refusals}/{secs}", any(throttle))
            .route("/switch/{name}", any(switch))
            .route("/slow-once/{name}/{ms}", any(slow_once))
            .route("/slow/{ms}", any(slow))
            .route("/echo/{status}", any(echo))
            .route("/nul-json", any(nul_json))
            .route("/mirror", any(mirror))
            .route("/json-switch/{name}", any(json_switch))
            .route("/nul-raw", any(nul_raw))
            .route("/hang/{name}", any(hang))
            .route("/keyed/{ms}", any(keyed))
            .fallback(any(fallback))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base_url: format!("http://{addr}"), inner }
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.inner.received.lock().unwrap().len()
    }

    /// When each request arrived, in order: cheaper than `received` for a count over time.
    pub fn arrivals(&self) -> Vec<DateTime<Utc>> {
        self.inner.received.lock().unwrap().iter().map(|r| r.at).collect()
    }

    /// How many requests to `path_prefix` it has received.
    pub fn count_of(&self, path_prefix: &str) -> usize {
        self.inner.received.lock().unwrap().iter().filter(|r| r.path.starts_with(path_prefix)).count()
    }

    /// From now on `/switch/{name}` answers 200.
    pub fn heal(&self, name: &str) {
        self.inner.healed.lock().unwrap().push(name.to_owned());
    }

    /// How many `/hang/{name}` requests were given up by their sender (the connection closed).
    pub fn hung_up(&self, name: &str) -> u32 {
        self.inner.hung_up.lock().unwrap().get(name).copied().unwrap_or(0)
    }

    /// The `seq`s of `key`'s `/keyed/…` requests answered 200, in the order they were.
    pub fn keyed_order(&self, key: &str) -> Vec<i64> {
        self.inner.keyed.lock().unwrap().get(key).map(|k| k.order.clone()).unwrap_or_default()
    }

    /// The most of `key`'s `/keyed/…` requests it held at one time.
    pub fn keyed_most_at_once(&self, key: &str) -> usize {
        self.inner.keyed.lock().unwrap().get(key).map_or(0, |k| k.most)
    }

    /// The most `/slow/…` requests it was holding at one time.
    pub fn most_slow_at_once(&self) -> usize {
        self.inner.slow_now.lock().unwrap().1
    }
}

fn record(inner: &Inner, uri: &Uri, headers: HeaderMap, body: Bytes) {
    inner.received.lock().unwrap().push(Received { path: uri.path().to_owned(), headers, body, at: Utc::now() });
}

fn bump(inner: &Inner, name: &str) -> u32 {
    let mut counters = inner.counters.lock().unwrap();
    let n = counters.entry(name.to_owned()).or_insert(0);
    *n += 1;
    *n
}

async fn fallback(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    record(&inner, &uri, headers, body);
    if uri.path().starts_with("/fail") {
        (StatusCode::INTERNAL_SERVER_ERROR, "boom")
    } else {
        (StatusCode::OK, "OK")
    }
}

async fn flaky(
    State(inner): State<Arc<Inner>>,
    Path((name, failures)): Path<(String, u32)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    record(&inner, &uri, headers, body);
    if bump(&inner, &name) <= failures {
        (StatusCode::SERVICE_UNAVAILABLE, "try later")
    } else {
        (StatusCode::OK, "OK")
    }
}

async fn switch(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    if healed(&inner, &name, &uri, headers, body) {
        (StatusCode::OK, "OK")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "down")
    }
}

/// Record the request; whether the test has healed `name`.
fn healed(inner: &Inner, name: &str, uri: &Uri, headers: HeaderMap, body: Bytes) -> bool {
    record(inner, uri, headers, body);
    inner.healed.lock().unwrap().iter().any(|h| h == name)
}

async fn mirror(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap, body: Bytes) -> (StatusCode, Bytes) {
    record(&inner, &uri, headers, body.clone());
    (StatusCode::OK, body)
}

async fn json_switch(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    if healed(&inner, &name, &uri, headers, body) {
        (StatusCode::OK, r#"{"ok": true}"#)
    } else {
        (StatusCode::OK, r#"{"ok": false, "error": "not yet"}"#)
    }
}

async fn throttle(
    State(inner): State<Arc<Inner>>,
    Path((name, refusals, secs)): Path<(String, u32, u64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    record(&inner, &uri, headers, body);
    if bump(&inner, &name) <= refusals {
        (StatusCode::TOO_MANY_REQUESTS, [("retry-after", secs.to_string())], "slow down").into_response()
    } else {
        (StatusCode::OK, "OK").into_response()
    }
}

async fn slow_once(
    State(inner): State<Arc<Inner>>,
    Path((name, ms)): Path<(String, u64)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    record(&inner, &uri, headers, body);
    if bump(&inner, &name) == 1 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    (StatusCode::OK, "OK")
}

/// Held until the sender closes the connection: the server then drops this future, and the
/// guard counts it.
async fn hang(
    State(inner): State<Arc<Inner>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    struct HungUp(Arc<Inner>, String);
    impl Drop for HungUp {
        fn drop(&mut self) {
            *self.0.hung_up.lock().unwrap().entry(self.1.clone()).or_insert(0) += 1;
        }
    }
    record(&inner, &uri, headers, body);
    let _guard = HungUp(inner, name);
    std::future::pending::<()>().await;
    unreachable!("a pending future never completes")
}

async fn slow(
    State(inner): State<Arc<Inner>>,
    Path(ms): Path<u64>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    record(&inner, &uri, headers, body);
    {
        let mut now = inner.slow_now.lock().unwrap();
        now.0 += 1;
        now.1 = now.1.max(now.0);
    }
    tokio::time::sleep(Duration::from_millis(ms)).await;
    inner.slow_now.lock().unwrap().0 -= 1;
    (StatusCode::OK, "OK")
}

async fn keyed(
    State(inner): State<Arc<Inner>>,
    Path(ms): Path<u64>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    record(&inner, &uri, headers, body);
    let key = asked["key"].as_str().unwrap_or_default().to_owned();
    let seq = asked["seq"].as_i64().unwrap_or(-1);
    let fail = {
        let mut keys = inner.keyed.lock().unwrap();
        let k = keys.entry(key.clone()).or_default();
        k.now += 1;
        k.most = k.most.max(k.now);
        let fail = asked["fail_once"] == Value::Bool(true) && !k.failed.contains(&seq);
        if fail {
            k.failed.push(seq);
        }
        fail
    };
    tokio::time::sleep(Duration::from_millis(ms)).await;
    let mut keys = inner.keyed.lock().unwrap();
    let k = keys.get_mut(&key).expect("entered above");
    k.now -= 1;
    if fail {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    k.order.push(seq);
    StatusCode::OK
}

/// What a careless receiver does: quote the whole request back in its answer.
async fn echo(
    State(inner): State<Arc<Inner>>,
    Path(status): Path<u16>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let quoted: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned())))
        .collect();
    let answer = serde_json::json!({
        "url": uri.to_string(),
        "headers": quoted,
        "body": String::from_utf8_lossy(&body),
    });
    record(&inner, &uri, headers, body);
    (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), answer.to_string())
}

async fn nul_json(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    record(&inner, &uri, headers, body);
    (StatusCode::OK, b"{\"ok\":\"a\0b\"}".to_vec())
}

async fn nul_raw(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap, body: Bytes) -> (StatusCode, Vec<u8>) {
    record(&inner, &uri, headers, body);
    (StatusCode::OK, b"ok\0 \xff\xfe end".to_vec())
}
