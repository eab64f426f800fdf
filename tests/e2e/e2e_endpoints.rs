//! Endpoints: registration of each transport type with its defaults, every check registration
//! makes (references, spec fields, templates), updates, deletes refused while in use, the
//! owner's pause, and the deadlines of `retry_policy.max_age_ms` and a job's `expires_at`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint as receiving_endpoint, immediate, wait_for_status};
use crate::support::{eventually, Backend, Client, Receiver, Server, TestDb};

both_backends!(
    endpoint_types_register_with_defaults,
    registration_checks,
    endpoint_update_and_delete,
    deletes_refused_while_referenced,
    a_paused_endpoint_holds_its_executions_until_resumed,
    a_deadline_ends_retries_and_fails_what_waited_past_it,
);

async fn setup(api: &Client) {
    api.create(
        "/payload-specs",
        &json!({"name": "welcome-input", "schema": {"type": "object", "required": ["user_id"]}}),
    )
    .await;
    api.create(
        "/configs",
        &json!({"name": "email-service", "values": {"api_base_url": "https://api.example.com", "sender": "noreply@example.com", "limits": {"max": 100}}}),
    )
    .await;
    api.create("/secrets", &json!({"name": "email_api_key", "value": "sk-live-abc123"})).await;
}

fn http_endpoint() -> Value {
    json!({
        "name": "send-welcome-email",
        "type": "HTTP",
        "payload_spec": "welcome-input",
        "config": "email-service",
        "spec": {
            "url": "{{config.api_base_url}}/emails/welcome",
            "method": "POST",
            "headers": {"Authorization": "Bearer {{secret.email_api_key}}", "Content-Type": "application/json"},
            "body_template": {"user_id": "{{input.user_id}}", "sender": "{{config.sender}}"},
            "timeout_ms": 5000,
        },
        "retry_policy": {"max_attempts": 3, "backoff": "exponential", "initial_delay_ms": 1000, "max_delay_ms": 30000}
    })
}

async fn endpoint_types_register_with_defaults(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    setup(&api).await;

    let http = api.create("/endpoints", &http_endpoint()).await;
    assert_eq!(http["type"], "HTTP");
    assert_eq!(http["version"], 1);
    assert_eq!(http["spec"]["expected_status_codes"], json!([200, 201, 202, 204]));
    assert_eq!(http["spec"]["timeout_ms"], 5000);
    assert_eq!(http["retry_policy"], http_endpoint()["retry_policy"]);
    // The idempotent repeat answers 200 with the same endpoint.
    let repeat = api.post("/endpoints", &http_endpoint()).await;
    assert_eq!((repeat.status.as_u16(), &repeat.body), (200, &http));

    let kafka = api
        .create(
            "/endpoints",
            &json!({"name": "publish-order-event", "type": "KAFKA", "spec": {
                "bootstrap_servers": "127.0.0.1:9092", "topic": "order.events.v1", "key_template": "{{input.order_id}}",
                "value_template": {"order_id": "{{input.order_id}}", "amount": "{{input.amount}}"},
                "headers": {"ce-type": "order.{{input.event_type}}"}
            }}),
        )
        .await;
    assert_eq!((kafka["spec"]["acks"].as_str(), kafka["spec"]["timeout_ms"].as_u64()), (Some("all"), Some(10_000)));
    // The default retry policy (docs/api.md): one attempt, exponential, 1 s, capped at 60 s.
    assert_eq!(
        kafka["retry_policy"],
        json!({"max_attempts": 1, "backoff": "exponential", "initial_delay_ms": 1000, "max_delay_ms": 60000})
    );

    let redis = api
        .create(
            "/endpoints",
            &json!({"name": "push-notification", "type": "REDIS_STREAM", "config": "email-service", "spec": {
                "redis_url": "redis://127.0.0.1:6379", "stream": "notifications:outbound",
                "fields_template": {"user_id": "{{input.user_id}}"}, "max_len": "{{config.limits.max}}"
            }}),
        )
        .await;
    assert_eq!(redis["spec"]["approximate_trimming"], true);
    assert_eq!(redis["spec"]["timeout_ms"], 3000);

    let (all, _) = api.list_all("/endpoints", 2).await;
    let names: Vec<&str> = all.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["send-welcome-email", "publish-order-event", "push-notification"]);
}

async fn registration_checks(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    setup(&api).await;
    let with = |path: &[&str], value: Value| {
        let mut body = http_endpoint();
        let mut node = &mut body;
        for key in &path[..path.len() - 1] {
            node = &mut node[*key];
        }
        node[path[path.len() - 1]] = value;
        body
    };

    // References must exist.
    let msg =
        api.post("/endpoints", &with(&["payload_spec"], json!("nope"))).await.error(422, "INVALID_PAYLOAD_SPEC_REF");
    assert!(msg.contains("'nope'"), "{msg}");
    let msg = api.post("/endpoints", &with(&["config"], json!("nope"))).await.error(422, "INVALID_CONFIG_REF");
    assert!(msg.contains("'nope'"), "{msg}");

    // Spec fields, per type, each named.
    for (path, value, field) in [
        (&["spec", "method"][..], json!("FETCH"), "spec.method"),
        (&["spec", "timeout_ms"][..], json!(0), "spec.timeout_ms"),
        (&["spec", "timeout_ms"][..], json!(-1), "spec.timeout_ms"),
        (&["spec", "expected_status_codes"][..], json!([200, 99]), "spec.expected_status_codes"),
        (&["spec", "url"][..], json!("ftp://files.example.com"), "spec.url"),
        (&["spec", "surprise"][..], json!(1), "spec.surprise"),
        (&["retry_policy", "max_attempts"][..], json!(0), "retry_policy.max_attempts"),
        (&["retry_policy", "backoff"][..], json!("sometimes"), "retry_policy.backoff"),
        (&["type"][..], json!("FTP"), "type"),
        (&["type"][..], json!("PLUGIN"), "plugin"),
    ] {
        let msg = api.post("/endpoints", &with(path, value)).await.error(400, "INVALID_REQUEST");
        assert!(msg.starts_with(&format!("`{field}`")), "{field}: {msg}");
    }
    let mut no_url = http_endpoint();
    no_url["spec"].as_object_mut().unwrap().remove("url");
    let msg = api.post("/endpoints", &no_url).await.error(400, "INVALID_REQUEST");
    assert!(msg.contains("url"), "{msg}");
    let msg = api
        .post("/endpoints", &json!({"name": "k", "type": "KAFKA", "spec": {"bootstrap_servers": "b:9092", "topic": "t", "value_template": {}, "acks": "2"}}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`spec.acks`"), "{msg}");
    let msg = api
        .post("/endpoints", &json!({"name": "r", "type": "REDIS_STREAM", "spec": {"redis_url": "redis://h", "stream": "s", "fields_template": {}}}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`spec.fields_template`"), "{msg}");

    // Templates parse at registration, not at 3 a.m.
    let msg = api
        .post("/endpoints", &with(&["spec", "headers", "X-Broken"], json!("{{ input.user_id ")))
        .await
        .error(422, "INVALID_TEMPLATE");
    assert!(msg.contains("spec.headers.X-Broken"), "{msg}");
    let msg =
        api.post("/endpoints", &with(&["spec", "url"], json!("{{ env.HOME }}/x"))).await.error(422, "INVALID_TEMPLATE");
    assert!(msg.contains("env"), "{msg}");
    // And what they name must resolve.
    let msg = api
        .post("/endpoints", &with(&["spec", "headers", "X-Key"], json!("{{secret.nope}}")))
        .await
        .error(422, "TEMPLATE_RESOLUTION_FAILED");
    assert!(msg.contains("secret.nope"), "{msg}");
    let msg = api
        .post("/endpoints", &with(&["spec", "url"], json!("{{config.missing_key}}/x")))
        .await
        .error(422, "TEMPLATE_RESOLUTION_FAILED");
    assert!(msg.contains("missing_key") && msg.contains("email-service"), "{msg}");
    let mut no_config = http_endpoint();
    no_config.as_object_mut().unwrap().remove("config");
    let msg = api.post("/endpoints", &no_config).await.error(422, "TEMPLATE_RESOLUTION_FAILED");
    assert!(msg.contains("names no `config`"), "{msg}");

    // Nothing was stored by any refused request.
    assert_eq!(api.get("/endpoints").await.body["items"], json!([]));
}

async fn endpoint_update_and_delete(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    setup(&api).await;
    let created = api.create("/endpoints", &http_endpoint()).await;

    let mut changed = http_endpoint();
    changed["spec"]["timeout_ms"] = json!(2000);
    changed["retry_policy"] = json!({"max_attempts": 5});
    let updated = api.put("/endpoints/send-welcome-email", &changed).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["version"], 2);
    assert_eq!(updated.body["spec"]["timeout_ms"], 2000);
    assert_eq!(updated.body["retry_policy"]["max_attempts"], 5);
    assert_eq!(updated.body["created_at"], created["created_at"]);
    assert_eq!(api.get("/endpoints/send-welcome-email").await.body, updated.body);

    // A repeat create now differs from what is stored.
    api.post("/endpoints", &http_endpoint()).await.error(409, "CONFLICT");
    api.put("/endpoints/other-name", &changed).await.error(400, "INVALID_REQUEST");
    let mut unnamed = changed.clone();
    unnamed.as_object_mut().unwrap().remove("name");
    api.put("/endpoints/missing", &unnamed).await.error(404, "ENDPOINT_NOT_FOUND");
    // Updates go through the same checks as creates.
    let mut broken = changed.clone();
    broken["spec"]["url"] = json!("{{secret.gone}}");
    api.put("/endpoints/send-welcome-email", &broken).await.error(422, "TEMPLATE_RESOLUTION_FAILED");
    assert_eq!(api.get("/endpoints/send-welcome-email").await.body["version"], 2);

    assert_eq!(api.delete("/endpoints/send-welcome-email").await.status, 204);
    api.get("/endpoints/send-welcome-email").await.error(404, "ENDPOINT_NOT_FOUND");
    api.delete("/endpoints/send-welcome-email").await.error(404, "ENDPOINT_NOT_FOUND");
}

async fn deletes_refused_while_referenced(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    setup(&api).await;
    api.create("/endpoints", &http_endpoint()).await;

    for (path, what) in [
        ("/payload-specs/welcome-input", "Payload spec"),
        ("/configs/email-service", "Config"),
        ("/secrets/email_api_key", "Secret"),
    ] {
        let msg = api.delete(path).await.error(409, "CONFLICT");
        assert!(msg.starts_with(what) && msg.contains("send-welcome-email"), "{path}: {msg}");
    }
    // An endpoint an active cron job delivers through cannot go. (The row is written directly:
    // the job's schedule does not matter here.)
    db.execute(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)
         VALUES ('job_test1', 'send-welcome-email', 'HTTP', 'CRON', '2026-01-01T00:00:00.000000Z')",
    )
    .await;
    let msg = api.delete("/endpoints/send-welcome-email").await.error(409, "CONFLICT");
    assert!(msg.contains("job_test1"), "{msg}");
    db.execute("DELETE FROM jobs").await;

    // An update that stops using the secret releases it.
    let mut without_secret = http_endpoint();
    without_secret["spec"]["headers"] = json!({});
    assert_eq!(api.put("/endpoints/send-welcome-email", &without_secret).await.status, 200);
    assert_eq!(api.delete("/secrets/email_api_key").await.status, 204);

    assert_eq!(api.delete("/endpoints/send-welcome-email").await.status, 204);
    assert_eq!(api.delete("/payload-specs/welcome-input").await.status, 204);
    assert_eq!(api.delete("/configs/email-service").await.status, 204);
}

/// A paused endpoint's executions wait, spending no attempt, while another endpoint's are
/// delivered; its cron ticks are still made; resumed, each is delivered once.
async fn a_paused_endpoint_holds_its_executions_until_resumed(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    receiving_endpoint(&api, &receiver, "held", "/ok/held", json!(null)).await;
    receiving_endpoint(&api, &receiver, "flowing", "/ok/flowing", json!(null)).await;

    let paused = api.post("/endpoints/held/pause", &json!({})).await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    let paused_at = paused.body["paused_at"].as_str().expect("paused_at").to_owned();
    let again = api.post("/endpoints/held/pause", &json!({})).await;
    assert_eq!(again.body["paused_at"], paused_at.as_str(), "pausing again keeps the first time");
    api.post("/endpoints/nope/pause", &json!({})).await.error(404, "ENDPOINT_NOT_FOUND");

    let input = json!({"user_id": "u", "amount": 1});
    let waiting = api.create("/jobs", &immediate("held", "w", input.clone())).await;
    let waiting = waiting["execution"]["execution_id"].as_str().unwrap().to_owned();
    let cron = api
        .create(
            "/jobs",
            &json!({"endpoint": "held", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": input}),
        )
        .await;
    let cron = cron["job_id"].as_str().unwrap().to_owned();
    let flowing = api.create("/jobs", &immediate("flowing", "f", input.clone())).await;
    wait_for_status(&api, flowing["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;

    // Ticks keep being made while nothing of the endpoint is claimed.
    eventually("two ticks of the paused endpoint's cron job", Duration::from_secs(10), || async {
        api.get(&format!("/jobs/{cron}/executions")).await.body["items"].as_array().unwrap().len() >= 2
    })
    .await;
    let execution = api.get(&format!("/executions/{waiting}")).await.body;
    assert_eq!(
        (execution["status"].as_str(), execution["attempt_count"].as_i64()),
        (Some("QUEUED"), Some(0)),
        "{execution}"
    );
    assert_eq!(receiver.count_of("/ok/held"), 0, "nothing was delivered to the paused endpoint");
    let listed = api.get("/endpoints").await.body;
    let held = listed["items"].as_array().unwrap().iter().find(|e| e["name"] == "held").unwrap().clone();
    assert_eq!(held["paused_at"], paused_at.as_str());

    let resumed = api.post("/endpoints/held/resume", &json!({})).await;
    assert_eq!(resumed.status, 200);
    assert!(resumed.body.get("paused_at").is_none(), "{}", resumed.text);
    let delivered = wait_for_status(&api, &waiting, "SUCCESS").await;
    assert_eq!(delivered["attempt_count"], 1, "waiting cost no attempt: {delivered}");
    let ticks = api.get(&format!("/jobs/{cron}/executions?limit=2")).await.body;
    for tick in ticks["items"].as_array().unwrap() {
        wait_for_status(&api, tick["execution_id"].as_str().unwrap(), "SUCCESS").await;
    }
}

/// `retry_policy.max_age_ms`: a failing execution stops retrying once its next attempt would
/// start past the deadline, and one that waited past it (behind a pause) fails unsent.
async fn a_deadline_ends_retries_and_fails_what_waited_past_it(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    // At most five attempts fit before the deadline: the circuit breaker (five failures) never opens.
    let policy = json!({"max_attempts": 50, "backoff": "fixed", "initial_delay_ms": 500, "max_age_ms": 1500});
    receiving_endpoint(&api, &receiver, "failing", "/fail/deadline", policy.clone()).await;
    receiving_endpoint(&api, &receiver, "late", "/ok/late", policy).await;
    let input = json!({"user_id": "u", "amount": 1});

    let job = api.create("/jobs", &immediate("failing", "f", input.clone())).await;
    let failed = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    let error = &failed["output"]["error"];
    assert_eq!(error["type"], "DEADLINE_EXCEEDED", "{failed}");
    assert_eq!(error["last_error"]["type"], "HTTP_ERROR", "{failed}");
    let attempts = failed["attempt_count"].as_i64().unwrap();
    assert!((2..50).contains(&attempts), "retried until the deadline, not to max_attempts: {failed}");
    let (started, finished) = (
        chrono::DateTime::parse_from_rfc3339(failed["scheduled_at"].as_str().unwrap()).unwrap(),
        chrono::DateTime::parse_from_rfc3339(failed["completed_at"].as_str().unwrap()).unwrap(),
    );
    assert!(
        finished - started < chrono::Duration::milliseconds(1500 + 1000),
        "no attempt after the deadline: {failed}"
    );

    api.post("/endpoints/late/pause", &json!({})).await;
    let job = api.create("/jobs", &immediate("late", "l", input)).await;
    let waiting = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let waiting_now = api.get(&format!("/executions/{waiting}")).await.body;
    let due = chrono::DateTime::parse_from_rfc3339(waiting_now["scheduled_at"].as_str().unwrap()).unwrap();
    eventually("the deadline to pass", Duration::from_secs(5), || async {
        chrono::Utc::now() > due + chrono::Duration::milliseconds(1600)
    })
    .await;
    api.post("/endpoints/late/resume", &json!({})).await;
    let expired = wait_for_status(&api, &waiting, "FAILED").await;
    assert_eq!(expired["output"]["error"]["type"], "DEADLINE_EXCEEDED", "{expired}");
    assert_eq!(receiver.count_of("/ok/late"), 0, "nothing was sent past the deadline");

    // A job's `expires_at`: its execution, not started by then, fails unsent; one started in
    // time is delivered.
    receiving_endpoint(&api, &receiver, "expiring", "/ok/expiring", json!({"max_attempts": 1})).await;
    api.post("/endpoints/expiring/pause", &json!({})).await;
    let expires = chrono::Utc::now() + chrono::Duration::milliseconds(500);
    let input = json!({"user_id": "u", "amount": 1});
    let body = json!({"endpoint": "expiring", "trigger": "IMMEDIATE", "idempotency_key": "x", "input": input,
                      "expires_at": expires.to_rfc3339()});
    let job = api.create("/jobs", &body).await;
    assert_eq!(job["expires_at"].as_str().map(|t| t[..19].to_owned()), Some(expires.to_rfc3339()[..19].to_owned()));
    let mut changed = body.clone();
    changed["expires_at"] = json!((expires + chrono::Duration::hours(1)).to_rfc3339());
    assert!(api.post("/jobs", &changed).await.error(409, "CONFLICT").contains("`expires_at`"), "a repeat must match");
    eventually("the job to expire", Duration::from_secs(5), || async { chrono::Utc::now() > expires }).await;
    api.post("/endpoints/expiring/resume", &json!({})).await;
    let expired = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    let error = &expired["output"]["error"];
    assert_eq!(error["type"], "DEADLINE_EXCEEDED", "{expired}");
    assert!(error["message"].as_str().unwrap().contains("expires_at"), "{expired}");
    let in_time = json!({"endpoint": "expiring", "trigger": "IMMEDIATE", "idempotency_key": "y", "input": input,
                         "expires_at": (chrono::Utc::now() + chrono::Duration::minutes(5)).to_rfc3339()});
    let job = api.create("/jobs", &in_time).await;
    wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(receiver.count_of("/ok/expiring"), 1, "only the job in time was sent");
    // An expiry the job could never meet, or on a cron job, is refused naming the field.
    let past = json!({"endpoint": "expiring", "trigger": "IMMEDIATE", "idempotency_key": "z", "input": input,
                      "expires_at": "2020-01-01T00:00:00Z"});
    assert!(api.post("/jobs", &past).await.error(400, "INVALID_REQUEST").contains("`expires_at`"));
    let cron = json!({"endpoint": "expiring", "trigger": "CRON", "cron": "0 9 * * *", "timezone": "UTC",
                      "expires_at": "2030-01-01T00:00:00Z"});
    assert!(api.post("/jobs", &cron).await.error(400, "INVALID_REQUEST").contains("`expires_at`"));
}
