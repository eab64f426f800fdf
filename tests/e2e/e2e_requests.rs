//! What every request gets: authentication, request ids, and the error shape for bad input.

use reqwest::Method;
use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, Client, Server, ServerOptions, TestDb};

both_backends!(authentication_is_required, malformed_requests_get_the_error_shape, health_checks);

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
