//! Payload specs and configs: create, idempotent repeat, conflicts, read, list, update, delete,
//! and the validation of names and schemas.

use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, Server, TestDb};

both_backends!(
    payload_spec_lifecycle,
    config_lifecycle,
    names_are_validated,
    invalid_schema_is_422,
    pagination_walks_every_page,
    concurrent_identical_creates_make_one_resource
);

async fn payload_spec_lifecycle(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let schema = json!({"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]});
    let body = json!({"name": "welcome-input", "schema": schema});

    let created = api.create("/payload-specs", &body).await;
    assert_eq!(created["name"], "welcome-input");
    assert_eq!(created["schema"], schema);
    assert_eq!(created["created_at"], created["updated_at"]);

    // The same create again is an idempotent repeat: 200 and the same body.
    let repeat = api.post("/payload-specs", &body).await;
    assert_eq!(repeat.status, 200);
    assert_eq!(repeat.body, created);
    // The same name with another schema is a conflict.
    let msg = api
        .post("/payload-specs", &json!({"name": "welcome-input", "schema": {"type": "string"}}))
        .await
        .error(409, "CONFLICT");
    assert!(msg.contains("PUT /payload-specs/welcome-input"), "{msg}");

    assert_eq!(api.get("/payload-specs/welcome-input").await.body, created);

    let new_schema = json!({"type": "object", "required": ["user_id", "order_id"]});
    let updated = api.put("/payload-specs/welcome-input", &json!({"schema": new_schema})).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["schema"], new_schema);
    assert_eq!(updated.body["created_at"], created["created_at"]);
    assert!(updated.body["updated_at"].as_str() > created["updated_at"].as_str());
    assert_eq!(api.get("/payload-specs/welcome-input").await.body["schema"], new_schema);

    api.put("/payload-specs/welcome-input", &json!({"name": "other", "schema": {}}))
        .await
        .error(400, "INVALID_REQUEST");
    api.put("/payload-specs/missing", &json!({"schema": {}})).await.error(404, "PAYLOAD_SPEC_NOT_FOUND");
    api.put("/payload-specs/welcome-input", &json!({"schema": {"type": 5}})).await.error(422, "INVALID_SCHEMA");

    let listed = api.get("/payload-specs").await;
    assert_eq!(listed.body, json!({"items": [updated.body], "cursor": null}));

    assert_eq!(api.delete("/payload-specs/welcome-input").await.status, 204);
    api.get("/payload-specs/welcome-input").await.error(404, "PAYLOAD_SPEC_NOT_FOUND");
    api.delete("/payload-specs/welcome-input").await.error(404, "PAYLOAD_SPEC_NOT_FOUND");
}

async fn config_lifecycle(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let values =
        json!({"bootstrap_servers": "kafka-1:9092,kafka-2:9092", "topic": "order.events.v1", "nested": {"n": 1.5}});
    let created = api.create("/configs", &json!({"name": "order-events", "values": values})).await;
    assert_eq!(created["values"], values);
    assert_eq!(api.post("/configs", &json!({"name": "order-events", "values": values})).await.status, 200);
    api.post("/configs", &json!({"name": "order-events", "values": {}})).await.error(409, "CONFLICT");

    let msg = api
        .post("/configs", &json!({"name": "c", "values": ["not", "an", "object"]}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.contains("`values`"), "{msg}");

    let updated = api.put("/configs/order-events", &json!({"values": {"topic": "t2"}})).await;
    assert_eq!(updated.body["values"], json!({"topic": "t2"}));
    api.get("/configs/nope").await.error(404, "CONFIG_NOT_FOUND");
    api.put("/configs/nope", &json!({"values": {}})).await.error(404, "CONFIG_NOT_FOUND");
    assert_eq!(api.delete("/configs/order-events").await.status, 204);
    api.delete("/configs/order-events").await.error(404, "CONFIG_NOT_FOUND");
}

async fn names_are_validated(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    for bad in ["Upper", "with space", "-lead", "trail-", "dou--ble", "under_score", ""] {
        let msg = api.post("/configs", &json!({"name": bad, "values": {}})).await.error(400, "INVALID_REQUEST");
        assert!(msg.starts_with("`name`"), "{bad}: {msg}");
        let msg = api.post("/payload-specs", &json!({"name": bad, "schema": {}})).await.error(400, "INVALID_REQUEST");
        assert!(msg.starts_with("`name`"), "{bad}: {msg}");
    }
    // Secrets may use underscores (`email_api_key`), not hyphens: they are read as
    // {{secret.NAME}}, where a hyphen would be a minus sign.
    api.create("/secrets", &json!({"name": "email_api_key", "value": "v"})).await;
    let msg = api.post("/secrets", &json!({"name": "email-api-key", "value": "v"})).await.error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`name`"), "{msg}");
    let msg = api.post("/configs", &json!({"values": {}})).await.error(400, "INVALID_REQUEST");
    assert!(msg.contains("missing field `name`"), "{msg}");
    let msg = api.post("/configs", &json!({"name": "a", "values": {}, "extra": 1})).await.error(400, "INVALID_REQUEST");
    assert!(msg.contains("extra"), "{msg}");
}

async fn invalid_schema_is_422(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    for schema in [
        json!({"type": "no-such-type"}),
        json!({"properties": {"a": {"minLength": -1}}}),
        json!({"required": "user_id"}),
        json!({"$ref": "#/definitions/missing"}),
        json!(42),
    ] {
        let msg =
            api.post("/payload-specs", &json!({"name": "s", "schema": schema})).await.error(422, "INVALID_SCHEMA");
        assert!(msg.contains("`schema`"), "{msg}");
    }
    api.get("/payload-specs/s").await.error(404, "PAYLOAD_SPEC_NOT_FOUND");
}

async fn pagination_walks_every_page(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let mut names: Vec<String> = (0..7).map(|i| format!("config-{i}")).collect();
    for name in &names {
        api.create("/configs", &json!({"name": name, "values": {}})).await;
    }

    let (items, pages) = api.list_all("/configs", 3).await;
    assert_eq!(pages, 3, "7 items at 3 a page");
    let listed: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(listed, names.iter().map(String::as_str).collect::<Vec<_>>(), "creation order, no repeats");

    // Rows created while a client pages show up at the end, and no row repeats or goes missing.
    let first = api.get("/configs?limit=4").await;
    assert_eq!(first.body["items"].as_array().unwrap().len(), 4);
    api.create("/configs", &json!({"name": "config-late", "values": {}})).await;
    names.push("config-late".into());
    let cursor = first.body["cursor"].as_str().unwrap();
    let rest = api.get(&format!("/configs?limit=200&cursor={cursor}")).await;
    let mut seen: Vec<String> =
        first.body["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_owned()).collect();
    seen.extend(rest.body["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_owned()));
    assert_eq!(seen, names);
    assert_eq!(rest.body["cursor"], json!(null));

    // Default limit is 50, max 200.
    assert_eq!(api.get("/configs").await.body["items"].as_array().unwrap().len(), 8);
    for bad in ["limit=0", "limit=201", "limit=abc"] {
        let msg = api.get(&format!("/configs?{bad}")).await.error(400, "INVALID_REQUEST");
        assert!(msg.contains("limit"), "{bad}: {msg}");
    }
    let msg = api.get("/configs?cursor=garbage").await.error(400, "INVALID_REQUEST");
    assert!(msg.contains("cursor"), "{msg}");
    // Every list pages the same way.
    for path in ["/payload-specs", "/secrets", "/endpoints"] {
        assert_eq!(api.get(&format!("{path}?limit=1")).await.body, json!({"items": [], "cursor": null}), "{path}");
        api.get(&format!("{path}?limit=500")).await.error(400, "INVALID_REQUEST");
    }
}

async fn concurrent_identical_creates_make_one_resource(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    api.create("/configs", &json!({"name": "base", "values": {"url": "https://x.example"}})).await;
    let endpoint = json!({"name": "raced", "type": "HTTP", "config": "base",
        "spec": {"url": "{{config.url}}/hook", "method": "POST"}});
    let config = json!({"name": "raced", "values": {"k": 1}});

    let mut tasks = Vec::new();
    for i in 0..16 {
        let (api, body, path) = if i % 2 == 0 {
            (api.clone(), endpoint.clone(), "/endpoints")
        } else {
            (api.clone(), config.clone(), "/configs")
        };
        tasks.push(tokio::spawn(async move { (path, api.post(path, &body).await) }));
    }
    let mut created = std::collections::HashMap::new();
    let mut bodies = std::collections::HashMap::new();
    for task in tasks {
        let (path, r) = task.await.unwrap();
        assert!(r.status == 201 || r.status == 200, "{path}: {}", r.text);
        *created.entry(path).or_insert(0) += usize::from(r.status == 201);
        bodies.entry(path).or_insert_with(Vec::new).push(r.body);
    }
    assert_eq!(created["/endpoints"], 1, "exactly one create wins");
    assert_eq!(created["/configs"], 1, "exactly one create wins");
    for same in bodies.values() {
        assert!(same.windows(2).all(|w| w[0] == w[1]), "every answer shows the one stored resource");
    }
}
