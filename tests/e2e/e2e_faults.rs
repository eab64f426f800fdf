//! Delivery under faults and hostile peers: a live attempt is never reclaimed, a result the
//! receiver gave is stored whatever bytes it holds (and never costs its batch-mates), bad API
//! input is a 4xx on both backends, secrets never reach what is stored, in any form, and one
//! slow endpoint cannot take every worker slot from the others.

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    a_live_attempt_is_never_reclaimed,
    a_late_result_of_a_reclaimed_attempt_is_fenced_out,
    results_holding_nul_bytes_are_stored_with_their_batch_mates,
    bad_input_with_nul_is_a_400_naming_the_field,
    secrets_are_never_stored_in_any_form,
    a_slow_endpoint_does_not_starve_another,
    max_concurrency_bounds_an_endpoints_deliveries,
    a_render_bomb_fails_its_execution_and_nothing_else,
    the_egress_deny_list_holds_for_every_spelling_of_an_address,
);

/// The reproduction: a lease (set through the old variable name) far shorter than a
/// slow receiver's answer. The worker renews its lease while the attempt runs, so the
/// reclaimer never takes it: one delivery, one attempt, SUCCESS.
async fn a_live_attempt_is_never_reclaimed(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(
        &db,
        ServerOptions::new().env("TE_STUCK_EXECUTION_TIMEOUT_SEC", "3").env("TE_RECLAIM_INTERVAL_SEC", "1"),
    )
    .await;
    let api = server.client();
    let receiver = Receiver::start().await;
    // timeout_ms is 10 000 (http_endpoint); the receiver answers after 6 s.
    http_endpoint(&api, &receiver, "slow", "/slow/6000", json!({"max_attempts": 3})).await;
    let job = api.create("/jobs", &immediate("slow", "slow-1", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let done = wait_for_status(&api, &execution_id, "SUCCESS").await;
    assert_eq!(done["attempt_count"], 1, "{done}");
    assert_eq!(receiver.count(), 1, "the receiver got the execution more than once");
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    assert_eq!(attempts["items"].as_array().unwrap().len(), 1, "{attempts}");
    assert!(server.output_text().contains("TE_STUCK_EXECUTION_TIMEOUT_SEC is deprecated"));
}

/// A worker cut off from the database can still finish an attempt after its execution was
/// reclaimed and retried. Its write is fenced out by the attempt number. (The reclaim is
/// made directly in the database: a live worker's lease is renewed, so it is never reclaimed.)
async fn a_late_result_of_a_reclaimed_attempt_is_fenced_out(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "slow", "/slow-once/late/3000", json!({"max_attempts": 3})).await;
    let job = api.create("/jobs", &immediate("slow", "late", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    eventually("the first delivery to be in flight", Duration::from_secs(30), || async { receiver.count() == 1 }).await;
    // What the reclaimer does to an expired lease: the execution is claimable again.
    db.execute(&format!(
        "UPDATE executions SET status = 'RETRYING', worker_id = NULL, lease_expires_at = NULL
         WHERE execution_id = '{execution_id}'"
    ))
    .await;
    let done = wait_for_status(&api, &execution_id, "SUCCESS").await;
    assert_eq!(done["attempt_count"], 2);
    eventually("the late result to be discarded", Duration::from_secs(30), || {
        let out = server.output_text();
        async move { out.contains("Attempt result discarded") }
    })
    .await;
    assert_eq!(api.get(&format!("/executions/{execution_id}")).await.body, done, "the late write changed nothing");
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    let summary: Vec<(i64, &str)> = attempts["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["attempt_number"].as_i64().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(summary, [(2, "SUCCESS")]);
}

/// PostgreSQL refuses NUL in text and JSON; a receiver answering with one (or with bytes that
/// are not UTF-8) must still have its answer recorded, and executions written in the same
/// batch must not suffer for it.
async fn results_holding_nul_bytes_are_stored_with_their_batch_mates(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "nul-json", "/nul-json", json!(null)).await;
    http_endpoint(&api, &receiver, "nul-raw", "/nul-raw", json!(null)).await;
    http_endpoint(&api, &receiver, "fine", "/ok/fine", json!(null)).await;
    let mut jobs = Vec::new();
    for i in 0..40 {
        let endpoint = match i % 10 {
            0 => "nul-json",
            5 => "nul-raw",
            _ => "fine",
        };
        jobs.push(tokio::spawn({
            let api = api.clone();
            async move {
                let job = api
                    .create("/jobs", &immediate(endpoint, &format!("k{i}"), json!({"user_id": "u", "amount": 1})))
                    .await;
                (endpoint, job["execution"]["execution_id"].as_str().unwrap().to_owned())
            }
        }));
    }
    let mut created = Vec::new();
    for job in jobs {
        created.push(job.await.unwrap());
    }
    for (endpoint, execution_id) in &created {
        let execution = wait_for_status(&api, execution_id, "SUCCESS").await;
        let body = execution["output"]["body"].as_str().unwrap();
        match *endpoint {
            "nul-json" => assert_eq!(body, "{\"ok\":\"a\u{FFFD}b\"}"),
            "nul-raw" => assert_eq!(body, "ok\u{FFFD} \u{FFFD}\u{FFFD} end"),
            _ => assert_eq!(body, "OK"),
        }
    }
    assert_eq!(db.scalar("SELECT COUNT(*) FROM attempts WHERE status = 'SUCCESS'").await, 40);
}

async fn bad_input_with_nul_is_a_400_naming_the_field(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "ok", "/ok/x", json!(null)).await;

    let message = api
        .post("/configs", &json!({"name": "c", "values": {"a": ["x", "y\u{0}z"]}}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("values.a[1]"), "{message}");
    let message =
        api.post("/configs", &json!({"name": "c", "values": {"k\u{0}": 1}})).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("values.k"), "{message}");
    let message = api
        .post(
            "/jobs",
            &json!({"endpoint": "ok", "trigger": "IMMEDIATE", "idempotency_key": "a\u{0}b", "input": {"user_id": "u"}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("idempotency_key"), "{message}");
    let message = api
        .post(
            "/jobs",
            &json!({"endpoint": "ok", "trigger": "IMMEDIATE", "idempotency_key": "k", "input": {"user_id": "\u{0}"}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("input.user_id"), "{message}");
    api.post("/secrets", &json!({"name": "s", "value": "v\u{0}"})).await.error(400, "INVALID_REQUEST");

    // Paths and query strings.
    for path in ["/jobs/job_%00", "/executions/exec_%00/attempts", "/configs/c%00", "/jobs?endpoint=ok%00"] {
        api.get(path).await.error(400, "INVALID_REQUEST");
    }
    // A forged cursor whose key holds a NUL.
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"t": "2026-01-01T00:00:00Z", "k": "a\u{0}b"}).to_string());
    let message = api.get(&format!("/configs?cursor={forged}")).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("cursor"), "{message}");
    // The service is fine afterwards.
    assert_eq!(api.get("/configs").await.status, 200);
}

/// Secrets with quotes, backslashes, a newline and URL-special characters, sent raw in a
/// header, a body and a URL to a receiver that quotes the whole request back in a 500: nothing
/// stored or answered holds any 8-character run of them, in raw, JSON-escaped, URL-encoded
/// or base64 form, in any case. A template that would change a secret's form (`|upper`,
/// `|list|join`, `|reverse`) is refused at registration.
async fn secrets_are_never_stored_in_any_form(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let body_secret = "sk-\"li\\ve\"\nQx7/Wp+9=Zr";
    let header_secret = "Tok/en+Wi=th&Sym%bols";
    api.create("/secrets", &json!({"name": "body_secret", "value": body_secret})).await;
    api.create("/secrets", &json!({"name": "header_secret", "value": header_secret})).await;
    api.create(
        "/endpoints",
        &json!({
            "name": "echo", "type": "HTTP",
            "spec": {
                // Raw in the query: the URL parser percent-encodes what it must.
                "url": format!("{}/echo/500?t={{{{secret.header_secret}}}}", receiver.base_url),
                "method": "POST",
                "headers": {"Authorization": "Bearer {{secret.header_secret}}"},
                "body_template": {"token": "{{secret.body_secret}}"}
            },
            "retry_policy": {"max_attempts": 2, "initial_delay_ms": 10}
        }),
    )
    .await;
    for changed in
        ["{{secret.header_secret|upper}}", "{{secret.body_secret|list|join(' ')}}", "{{secret.body_secret|reverse}}"]
    {
        let message = api
            .post(
                "/endpoints",
                &json!({"name": "changed", "type": "HTTP",
                        "spec": {"url": receiver.base_url.clone(), "method": "POST", "headers": {"X-Leak": changed}}}),
            )
            .await
            .error(422, "INVALID_TEMPLATE");
        assert!(message.contains("spec.headers.X-Leak") && message.contains("as it is"), "{changed}: {message}");
    }
    let job = api.create("/jobs", &immediate("echo", "leak", json!({}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let execution = wait_for_status(&api, &execution_id, "FAILED").await;
    assert_eq!(receiver.count(), 2, "both attempts reached the receiver: {execution}");
    // The receiver really saw the secrets (so the echo would have leaked them).
    assert!(receiver.received()[0].json()["token"] == body_secret);

    let mut stored = vec![execution.to_string()];
    for path in ["attempts", "logs"] {
        let (items, _) = api.list_all(&format!("/executions/{execution_id}/{path}"), 200).await;
        stored.extend(items.iter().map(Value::to_string));
    }
    stored.push(api.get(&format!("/jobs/{}", job["job_id"].as_str().unwrap())).await.text);
    stored.extend(db.texts("SELECT CAST(output AS TEXT) FROM executions").await);
    stored.extend(db.texts("SELECT CAST(output AS TEXT) FROM attempts").await);
    stored.extend(db.texts("SELECT CAST(error AS TEXT) FROM attempts").await);
    stored.extend(db.texts("SELECT message FROM execution_logs").await);
    let everything = stored.join("\n");
    assert!(everything.contains("[redacted]"), "the echo was not redacted: {everything}");
    for secret in [body_secret, header_secret] {
        assert_no_trace(&everything, secret);
    }
}

/// No 8-character run of `secret`'s raw, JSON-escaped (once or twice), URL-encoded or base64 forms appears
/// in `text`, in any case.
fn assert_no_trace(text: &str, secret: &str) {
    let json = serde_json::to_string(secret).unwrap();
    let twice = serde_json::to_string(&json[1..json.len() - 1]).unwrap();
    let forms = [
        secret.to_owned(),
        json[1..json.len() - 1].to_owned(),
        twice[1..twice.len() - 1].to_owned(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>(),
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(secret),
    ];
    let lower = text.to_lowercase();
    for form in forms {
        let chars: Vec<char> = form.chars().collect();
        for run in chars.windows(8) {
            let run: String = run.iter().collect::<String>().to_lowercase();
            assert!(!lower.contains(&run), "{run:?} (from {form:?}) is stored:\n{text}");
        }
    }
}

/// An HTTP endpoint `name` posting to `path` on the receiver, with a 10 s timeout, one
/// attempt, and `max_concurrency` when given.
async fn plain_endpoint(api: &Client, receiver: &Receiver, name: &str, path: &str, max_concurrency: Option<u32>) {
    let mut endpoint = json!({
        "name": name, "type": "HTTP",
        "spec": {"url": format!("{}{path}", receiver.base_url), "method": "POST", "timeout_ms": 10000},
    });
    if let Some(n) = max_concurrency {
        endpoint["max_concurrency"] = json!(n);
    }
    let created = api.create("/endpoints", &endpoint).await;
    assert_eq!(created["max_concurrency"], endpoint["max_concurrency"]);
}

/// The reproduction: four slots, eight jobs to a receiver that hangs, then one job to
/// a fast receiver. The fast one is delivered while every hanging attempt is still in flight
/// (without shares, it waited for the first of them to time out).
async fn a_slow_endpoint_does_not_starve_another(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_WORKER_MAX_CONCURRENT", "4")).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    plain_endpoint(&api, &receiver, "hangs", "/slow/20000", None).await;
    plain_endpoint(&api, &receiver, "fast", "/ok/fast", None).await;
    let mut hanging = Vec::new();
    for i in 0..8 {
        let job = api.create("/jobs", &immediate("hangs", &format!("h{i}"), json!({}))).await;
        hanging.push(job["execution"]["execution_id"].as_str().unwrap().to_owned());
    }
    eventually("the hanging endpoint to fill its share", Duration::from_secs(30), || async {
        receiver.count_of("/slow") == 3
    })
    .await;
    let job = api.create("/jobs", &immediate("fast", "f", json!({}))).await;
    let fast = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &fast, "SUCCESS").await;
    for id in &hanging {
        let status = api.get(&format!("/executions/{id}")).await.body["status"].clone();
        assert!(status == "RUNNING" || status == "QUEUED", "{id} is {status}: the fast job waited for it");
    }
    assert_eq!(receiver.count_of("/slow"), 3, "the hanging endpoint held more than all slots but one");
}

/// `max_concurrency: 2` on an endpoint with six slow jobs and fifty free slots: the receiver
/// never holds more than two of its requests at once, and does hold two.
async fn max_concurrency_bounds_an_endpoints_deliveries(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    plain_endpoint(&api, &receiver, "limited", "/slow/700", Some(2)).await;
    let mut executions = Vec::new();
    for i in 0..6 {
        let job = api.create("/jobs", &immediate("limited", &format!("l{i}"), json!({}))).await;
        executions.push(job["execution"]["execution_id"].as_str().unwrap().to_owned());
    }
    for id in &executions {
        wait_for_status(&api, id, "SUCCESS").await;
    }
    assert_eq!(receiver.most_slow_at_once(), 2);
    // Out of range is refused, naming the field.
    let message = api
        .post(
            "/endpoints",
            &json!({"name": "bad", "type": "HTTP", "max_concurrency": 0,
            "spec": {"url": "http://127.0.0.1:9/x", "method": "GET"}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("max_concurrency"), "{message}");
}

/// A template nesting loops over a large input runs out of its budget: that execution fails at
/// once naming the field, and the service goes on answering and delivering.
async fn a_render_bomb_fails_its_execution_and_nothing_else(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({
            "name": "bomb", "type": "HTTP",
            "spec": {
                "url": format!("{}/ok/bomb", receiver.base_url), "method": "POST",
                "body_template": {"x": "{% for a in input.items %}{% for b in input.items %}{% for c in input.items %}.{% endfor %}{% endfor %}{% endfor %}"}
            },
            "retry_policy": {"max_attempts": 3}
        }),
    )
    .await;
    plain_endpoint(&api, &receiver, "fine", "/ok/fine", None).await;
    let items: Vec<u32> = (0..2000).collect();
    let job = api.create("/jobs", &immediate("bomb", "boom", json!({"items": items}))).await;
    let bomb = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let failed = wait_for_status(&api, &bomb, "FAILED").await;
    assert_eq!(failed["attempt_count"], 1, "not retried: {failed}");
    let error = &failed["output"]["error"];
    assert_eq!(error["type"], "TEMPLATE_RESOLUTION_FAILED", "{failed}");
    assert!(error["message"].as_str().unwrap().contains("spec.body_template.x"), "{failed}");
    assert_eq!(Client::new(&server.base_url, None).get("/healthz").await.status, 200);
    let job = api.create("/jobs", &immediate("fine", "after", json!({}))).await;
    wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(receiver.count_of("/ok/bomb"), 0);
}

/// With loopback denied, an HTTP endpoint cannot reach it by any spelling of the address or
/// by a name that resolves to it, nor can a Redis Streams endpoint (the Redis server runs on
/// loopback): each execution fails at once, naming the policy, and the receiver (on loopback)
/// never sees a request. (Every address tried is on this machine.)
async fn the_egress_deny_list_holds_for_every_spelling_of_an_address(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_EGRESS_DENY", "127.0.0.0/8,::1/128")).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let port = receiver.base_url.rsplit(':').next().unwrap().to_owned();
    let hosts =
        ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "127.0.0.1.", "0177.0.0.1", "localhost", "[::1]", "0"];
    let mut executions = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let name = format!("spelling-{i}");
        api.create(
            "/endpoints",
            &json!({"name": name, "type": "HTTP", "retry_policy": {"max_attempts": 3},
                    "spec": {"url": format!("http://{host}:{port}/ok/egress"), "method": "GET"}}),
        )
        .await;
        let job = api.create("/jobs", &immediate(&name, "k", json!({}))).await;
        executions.push((host.to_string(), job["execution"]["execution_id"].as_str().unwrap().to_owned()));
    }
    for (i, host) in ["127.0.0.1", "127.1", "localhost"].iter().enumerate() {
        let name = format!("redis-{i}");
        api.create(
            "/endpoints",
            &json!({"name": name, "type": "REDIS_STREAM", "retry_policy": {"max_attempts": 3},
                    "spec": {"redis_url": format!("redis://{host}:6379"), "stream": "taskexec-test:egress-denied",
                             "fields_template": {"a": "b"}}}),
        )
        .await;
        let job = api.create("/jobs", &immediate(&name, "k", json!({}))).await;
        executions.push((format!("redis {host}"), job["execution"]["execution_id"].as_str().unwrap().to_owned()));
    }
    for (host, id) in &executions {
        let failed = wait_for_status(&api, id, "FAILED").await;
        assert_eq!(failed["attempt_count"], 1, "{host}: refused egress is not retried: {failed}");
        let message = failed["output"]["error"]["message"].as_str().unwrap();
        assert!(message.contains("egress policy refuses"), "{host}: {message}");
    }
    assert_eq!(receiver.count(), 0, "a denied address was reached");
}
