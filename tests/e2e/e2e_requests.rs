//! What every request gets: authentication, request ids, and the error shape for bad input.

use reqwest::Method;
use serde_json::json;

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    authentication_is_required,
    malformed_requests_get_the_error_shape,
    health_checks,
    metrics_describe_the_deliveries_made,
    the_idempotency_key_header_keys_creates_as_the_body_field_does,
);

async fn authentication_is_required(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server =
        Server::start_with(&db, ServerOptions::new().env("TE_API_KEYS", "first-key-0123456789, second-key-0123456789"))
            .await;
    let anonymous = Client::new(&server.base_url, None);
    for path in ["/payload-specs", "/configs", "/secrets", "/endpoints", "/configs/x"] {
        anonymous.get(path).await.error(401, "UNAUTHORIZED");
        anonymous.with_key(Some("wrong-key-0123456789")).get(path).await.error(401, "UNAUTHORIZED");
    }
    anonymous.post("/configs", &json!({"name": "c", "values": {}})).await.error(401, "UNAUTHORIZED");
    // Both configured keys work.
    for key in ["first-key-0123456789", "second-key-0123456789"] {
        assert_eq!(anonymous.with_key(Some(key)).get("/configs").await.status, 200);
    }
    // Nothing was written by the refused create.
    assert_eq!(anonymous.with_key(Some("first-key-0123456789")).get("/configs").await.body["items"], json!([]));
}

async fn malformed_requests_get_the_error_shape(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_MAX_BODY_BYTES", "4096")).await;
    let api = server.client();

    let msg = api
        .send_raw(Method::POST, "/configs", Some("application/json"), b"{\"name\": ".to_vec())
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.contains("not valid JSON"), "{msg}");
    api.send_raw(Method::POST, "/configs", Some("application/json"), b"{} trailing".to_vec())
        .await
        .error(400, "INVALID_REQUEST");
    let msg = api
        .send_raw(Method::POST, "/configs", Some("text/plain"), br#"{"name":"c","values":{}}"#.to_vec())
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.contains("Content-Type"), "{msg}");
    api.send_raw(Method::POST, "/configs", None, br#"{"name":"c","values":{}}"#.to_vec())
        .await
        .error(400, "INVALID_REQUEST");
    // A `+json` media type with parameters is JSON too.
    let ok = api
        .send_raw(
            Method::POST,
            "/configs",
            Some("application/vnd.api+json; charset=utf-8"),
            br#"{"name":"c","values":{}}"#.to_vec(),
        )
        .await;
    assert_eq!(ok.status, 201, "{}", ok.text);

    let big = json!({"name": "big", "values": {"blob": "x".repeat(8192)}});
    api.post("/configs", &big).await.error(413, "PAYLOAD_TOO_LARGE");
    api.get("/configs/big").await.error(404, "CONFIG_NOT_FOUND");

    let msg = api.post("/configs", &json!({"name": 12, "values": {}})).await.error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`name`"), "{msg}");
    api.get("/no-such-route").await.error(404, "NOT_FOUND");
    api.send(Method::PATCH, "/configs/c", None).await.error(405, "METHOD_NOT_ALLOWED");

    // Every response carries a request id; a caller's own well-formed id is kept.
    let r = api.get("/configs").await;
    assert!(r.headers["x-request-id"].to_str().unwrap().starts_with("req_"));
    let traced = reqwest::Client::new()
        .get(format!("{}/healthz", server.base_url))
        .header("x-request-id", "trace-abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(traced.headers()["x-request-id"], "trace-abc-123");
}

async fn health_checks(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let anonymous = Client::new(&server.base_url, None);
    let r = anonymous.get("/healthz").await;
    assert_eq!((r.status.as_u16(), &r.body["status"]), (200, &json!("ok")), "{}", r.text);
    // Each loop of the process is listed, alive (the worker's may still be starting).
    let loops = r.body["loops"].as_array().expect("loops");
    assert!(loops.iter().any(|l| l["name"] == "scheduler.cron_materializer" && l["alive"] == true), "{}", r.text);
    let r = anonymous.get("/readyz").await;
    assert_eq!((r.status.as_u16(), r.body.clone()), (200, json!({"status": "ready"})));
}

/// The value of the Prometheus sample `name` whose labels include every one of `labels`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        let matches = metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        matches.then(|| value.parse().ok()).flatten()
    })
}

/// `/metrics` (unauthenticated, like the health checks) counts what the process did: jobs
/// created, executions finished by endpoint and status, attempts by outcome and error type,
/// delivery time and lateness, and reads the queue and the pool when scraped. No id appears.
async fn metrics_describe_the_deliveries_made(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "fine", "/ok/fine", json!(null)).await;
    http_endpoint(&api, &receiver, "broken", "/fail/broken", json!({"max_attempts": 1})).await;
    let input = json!({"user_id": "u", "amount": 1});
    let ok = api.create("/jobs", &immediate("fine", "m-ok", input.clone())).await;
    let bad = api.create("/jobs", &immediate("broken", "m-bad", input)).await;
    let ok_id = ok["execution"]["execution_id"].as_str().unwrap().to_owned();
    let bad_id = bad["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &ok_id, "SUCCESS").await;
    wait_for_status(&api, &bad_id, "FAILED").await;

    let r = Client::new(&server.base_url, None).get("/metrics").await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert!(r.headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = &r.text;
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(text, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in:\n{text}"))
    };
    let created = [("trigger", "IMMEDIATE"), ("endpoint_type", "HTTP"), ("tenant", "default")];
    assert_eq!(value("taskexec_jobs_created_total", &created), 2.0);
    let finished = "taskexec_executions_finished_total";
    let fine = [("tenant", "default"), ("endpoint", "fine"), ("status", "SUCCESS"), ("endpoint_type", "HTTP")];
    assert_eq!(value(finished, &fine), 1.0);
    assert_eq!(value(finished, &[("endpoint", "broken"), ("status", "FAILED")]), 1.0);
    assert_eq!(value("taskexec_attempts_total", &[("outcome", "failure"), ("error_type", "HTTP_ERROR")]), 1.0);
    assert_eq!(value("taskexec_attempts_total", &[("outcome", "success")]), 1.0);
    assert_eq!(value("taskexec_delivery_duration_seconds_count", &[("endpoint_type", "HTTP")]), 2.0);
    assert_eq!(value("taskexec_fire_lateness_seconds_count", &[]), 2.0);
    for status in ["PENDING", "QUEUED", "RUNNING", "RETRYING"] {
        assert_eq!(value("taskexec_executions", &[("status", status)]), 0.0, "{status}");
    }
    assert_eq!(value("taskexec_worker_slots_capacity", &[]), 200.0);
    assert_eq!(value("taskexec_worker_slots_busy", &[]), 0.0);
    assert!(value("taskexec_db_pool_connections", &[("state", "idle")]) >= 1.0);
    assert!(value("taskexec_scheduler_loop_duration_seconds_count", &[("loop", "promoter")]) >= 1.0);
    for id in [&ok_id, &bad_id, ok["job_id"].as_str().unwrap(), bad["job_id"].as_str().unwrap()] {
        assert!(!text.contains(id), "{id} in the metrics");
    }
}

/// `TE_API_RATE_LIMIT`: a key over its rate gets 429 RATE_LIMITED with Retry-After, and gets
/// through again once it waited; the health checks and /metrics are never limited. (SQLite
/// only: the limit is kept in the process, not the database.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_over_its_rate_is_told_when_to_come_back() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server =
        Server::start_with(&db, ServerOptions::new().env("TE_API_RATE_LIMIT", "2").env("TE_API_RATE_BURST", "3")).await;
    let api = server.client();
    let mut limited = None;
    for _ in 0..10 {
        let r = api.get("/configs").await;
        match r.status.as_u16() {
            200 => {}
            429 => {
                limited = Some(r);
                break;
            }
            other => panic!("answered {other}: {}", r.text),
        }
    }
    let limited = limited.expect("ten requests at once are over a burst of three");
    let message = limited.error(429, "RATE_LIMITED");
    assert!(message.contains("TE_API_RATE_LIMIT"), "{message}");
    let retry_after: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "Retry-After: {retry_after}");
    let anonymous = Client::new(&server.base_url, None);
    for path in ["/healthz", "/readyz", "/metrics"] {
        for _ in 0..10 {
            assert_eq!(anonymous.get(path).await.status.as_u16(), 200, "{path} is never limited");
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(retry_after + 5);
    loop {
        let status = api.get("/configs").await.status.as_u16();
        if status == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {status} after Retry-After");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A client dripping its request head is cut off at `TE_HEADER_READ_TIMEOUT_SEC`, and the
/// server serves at most `TE_MAX_CONNECTIONS` connections at once: one more waits until one
/// closes. (SQLite only: the server's limits do not involve the database.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_connections_are_capped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start_with(
        &db,
        ServerOptions::new().env("TE_HEADER_READ_TIMEOUT_SEC", "1").env("TE_MAX_CONNECTIONS", "2"),
    )
    .await;
    let addr = server.base_url.trim_start_matches("http://").to_owned();
    // Half a request head, then nothing: the server closes the connection after about 1 s.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(10), slow.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "a connection dripping its head was still open after 10 s");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "cut off after {:?}", started.elapsed());
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"), "the half request was answered");

    // Two idle connections hold both slots (each is accepted, and cut off after 1 s); a third
    // client is not served until one of them closes, then it is.
    let first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let anonymous = Client::new(&server.base_url, None);
    let started = std::time::Instant::now();
    assert_eq!(anonymous.get("/healthz").await.status.as_u16(), 200);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(500),
        "served at once although two connections held both slots ({:?})",
        started.elapsed()
    );
    drop((first, second));
}

/// The API describes itself: /openapi.json (OpenAPI 3.1) and Swagger UI at /docs, whose assets
/// the binary serves itself; every documented operation is a route the server has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_document_and_its_viewer_are_served() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let anonymous = Client::new(&server.base_url, None);
    let doc = anonymous.get("/openapi.json").await;
    assert_eq!(doc.status, 200, "{}", doc.text);
    assert_eq!(doc.body["openapi"], "3.1.0");
    let api = server.client();
    let mut operations = 0;
    for (path, item) in doc.body["paths"].as_object().unwrap() {
        let concrete = path.split('/').map(|p| if p.starts_with('{') { "x" } else { p }).collect::<Vec<_>>().join("/");
        for method in ["get", "post", "put", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            operations += 1;
            let body = json!({});
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let r = api.send(m, &concrete, (method == "post" || method == "put").then_some(&body)).await;
            assert!(
                r.status != 405 && r.body["error"]["code"] != "NOT_FOUND" && r.status.as_u16() < 500,
                "{method} {path} is documented but answered {}: {}",
                r.status,
                r.text
            );
        }
    }
    assert!(operations >= 37, "{operations} operations");

    let page = reqwest::get(format!("{}/docs/", server.base_url)).await.unwrap();
    assert_eq!(page.status(), 200);
    // The same kind of headers as the dashboard's pages: this origin's scripts only, no framing.
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("swagger-ui-bundle.js") && !html.contains("src=\"http"),
        "assets are the server's own: {html}"
    );
    let bundle = reqwest::get(format!("{}/docs/swagger-ui-bundle.js", server.base_url)).await.unwrap();
    assert_eq!(bundle.status(), 200);
    assert!(bundle.bytes().await.unwrap().len() > 100_000, "the viewer's script is embedded");
}

async fn the_idempotency_key_header_keys_creates_as_the_body_field_does(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hooks", "/ok/hooks", json!({})).await;
    let post = |path: &'static str, body: serde_json::Value, key: &str| {
        let (api, key) = (api.clone(), key.to_owned());
        async move { api.send_with(Method::POST, path, Some(&body), &[("Idempotency-Key", &key)]).await }
    };
    let unkeyed = json!({"endpoint": "hooks", "trigger": "IMMEDIATE", "input": {"user_id": "u1"}});

    // A one-shot job keyed by the header alone; the same request again is its repeat.
    let first = post("/jobs", unkeyed.clone(), "order-7").await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.body["idempotency_key"], "order-7");
    let again = post("/jobs", unkeyed.clone(), "order-7").await;
    assert_eq!((again.status.as_u16(), &again.body["job_id"]), (200, &first.body["job_id"]), "{}", again.text);
    // The body's key and the header's together: the same one is the same job, two differ.
    let both = post(
        "/jobs",
        json!({"idempotency_key": "order-7", "endpoint": "hooks", "trigger": "IMMEDIATE", "input": {"user_id": "u1"}}),
        "order-7",
    )
    .await;
    assert_eq!((both.status.as_u16(), &both.body["job_id"]), (200, &first.body["job_id"]), "{}", both.text);
    let message = post("/jobs", immediate("hooks", "order-8", json!({"user_id": "u3"})), "order-9")
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("`idempotency_key`") && message.contains("order-9"), "{message}");
    // Without either, a one-shot job is refused as before, naming the body's field.
    let message = api.post("/jobs", &unkeyed).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`idempotency_key`"), "{message}");
    // A header no key could be.
    let message = post("/jobs", unkeyed.clone(), &"k".repeat(256)).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`Idempotency-Key`") && message.contains("1-255"), "{message}");
    let message = post("/jobs", unkeyed.clone(), "").await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`Idempotency-Key`"), "{message}");

    // A batch keyed by the header: job i takes `{key}:{i}`, and the same batch again finds them.
    let batch =
        json!({"jobs": [unkeyed.clone(), {"endpoint": "hooks", "trigger": "IMMEDIATE", "input": {"user_id": "u2"}}]});
    let created = post("/jobs/batch", batch.clone(), "import-42").await;
    assert_eq!((created.status.as_u16(), created.body["created"].as_u64()), (200, Some(2)), "{}", created.text);
    assert_eq!(created.body["items"][1]["job"]["idempotency_key"], "import-42:1");
    let repeated = post("/jobs/batch", batch, "import-42").await;
    assert_eq!(repeated.body["existing"].as_u64(), Some(2), "{}", repeated.text);
    for i in 0..2 {
        assert_eq!(repeated.body["items"][i]["job"]["job_id"], created.body["items"][i]["job"]["job_id"]);
    }
    // A job of a keyed batch that names its own key: the whole batch is refused, nothing written.
    let mixed = json!({"jobs": [{"endpoint": "hooks", "trigger": "IMMEDIATE", "input": {"user_id": "u3"}}, immediate("hooks", "own", json!({"user_id": "u3"}))]});
    let message = post("/jobs/batch", mixed, "import-43").await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`jobs[1].idempotency_key`"), "{message}");
    let (jobs, _) = api.list_all("/jobs", 100).await;
    assert_eq!(jobs.len(), 3, "the one single create and the first batch's two");
    let message = post("/jobs/batch", json!({"jobs": [unkeyed]}), &"k".repeat(252)).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("1-251"), "{message}");
}
