//! Tenants: made by operator keys; each tenant's keys see and change its own resources alone.
//! Two tenants with the same names side by side, every kind of route tried with the other
//! tenant's names and ids (a 404, as if it did not exist), deliveries made with each tenant's
//! own config and secret, and a secret's envelope bound to its tenant.

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{immediate, wait_for_status};
use crate::support::{Backend, Client, Receiver, Server, TestDb};

both_backends!(
    tenants_are_made_by_operator_keys_alone,
    each_tenant_sees_and_changes_its_own_resources_alone,
    a_secret_s_envelope_opens_for_its_own_tenant_alone,
    quotas_hold_at_their_edges,
    a_tenant_is_deleted_with_all_it_holds_once_nothing_of_it_is_active,
);

/// A key of `role` issued to `tenant` by the operator; a client holding it.
async fn key_of(operator: &Client, tenant: &str, role: &str) -> Client {
    let made = operator.create(&format!("/tenants/{tenant}/api-keys"), &json!({"role": role})).await;
    assert_eq!(made["tenant"], tenant);
    operator.with_key(Some(made["key"].as_str().unwrap()))
}

async fn tenants_are_made_by_operator_keys_alone(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let operator = server.client();

    let made = operator.post("/tenants", &json!({"name": "acme"})).await;
    assert_eq!((made.status.as_u16(), made.body["name"].as_str()), (201, Some("acme")), "{}", made.text);
    assert_eq!(operator.post("/tenants", &json!({"name": "acme"})).await.status, 200, "an idempotent repeat");
    assert_eq!(operator.post("/tenants", &json!({"name": "default"})).await.status, 200, "every deployment has it");
    for bad in ["", "Acme", "a/b", "a_b", "-a"] {
        let message = operator.post("/tenants", &json!({"name": bad})).await.error(400, "INVALID_REQUEST");
        assert!(message.starts_with("`name`"), "{bad}: {message}");
    }
    let (listed, _) = operator.list_all("/tenants", 10).await;
    let names: Vec<&str> = listed.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "acme"]);

    let admin = key_of(&operator, "acme", "admin").await;

    // An operator key acts within the tenant its request names; a tenant's key within its own.
    let within = |tenant: &'static str| [("taskexec-tenant", tenant)];
    let config = json!({"name": "made-by-operator", "values": {}});
    let made = operator.send_with(reqwest::Method::POST, "/configs", Some(&config), &within("acme")).await;
    assert_eq!(made.status.as_u16(), 201, "{}", made.text);
    assert_eq!(admin.get("/configs/made-by-operator").await.status.as_u16(), 200, "acme's");
    operator.get("/configs/made-by-operator").await.error(404, "CONFIG_NOT_FOUND");
    let missing = operator.send_with(reqwest::Method::GET, "/configs", None, &within("beta")).await;
    missing.error(404, "TENANT_NOT_FOUND");
    let other = admin.send_with(reqwest::Method::GET, "/configs", None, &within("default")).await;
    other.error(404, "TENANT_NOT_FOUND");
    let own = admin.send_with(reqwest::Method::GET, "/configs/made-by-operator", None, &within("acme")).await;
    assert_eq!(own.status.as_u16(), 200);

    let message = admin.post("/tenants", &json!({"name": "beta"})).await.error(403, "FORBIDDEN");
    assert!(message.contains("operator"), "{message}");
    assert_eq!(admin.get("/tenants/acme").await.body["name"], "acme");
    admin.get("/tenants/default").await.error(404, "TENANT_NOT_FOUND");
    // Its own admin issues its keys; another tenant's keys are out of its reach.
    assert_eq!(admin.post("/tenants/acme/api-keys", &json!({"role": "read"})).await.status, 201);
    admin.post("/tenants/default/api-keys", &json!({"role": "read"})).await.error(404, "TENANT_NOT_FOUND");
    operator.post("/tenants/beta/api-keys", &json!({"role": "read"})).await.error(404, "TENANT_NOT_FOUND");
}

/// What each tenant registers: the same names, its own values.
async fn register(api: &Client, receiver: &Receiver, tenant: &str) {
    api.create("/payload-specs", &json!({"name": "orders", "schema": {"type": "object"}})).await;
    api.create("/configs", &json!({"name": "orders", "values": {"base_url": receiver.base_url, "tenant": tenant}}))
        .await;
    api.create("/secrets", &json!({"name": "token", "value": format!("secret-of-{tenant}")})).await;
    api.create(
        "/endpoints",
        &json!({
            "name": "orders", "type": "HTTP", "payload_spec": "orders", "config": "orders",
            "spec": {
                "url": "{{config.base_url}}/orders", "method": "POST",
                "headers": {"Authorization": "Bearer {{secret.token}}", "X-Tenant": "{{config.tenant}}"},
                "body_template": {"n": "{{input.n}}"}
            },
            "retry_policy": {"max_attempts": 1}
        }),
    )
    .await;
    api.create(
        "/endpoints",
        &json!({"name": "alerts", "type": "HTTP", "config": "orders",
                "spec": {"url": "{{config.base_url}}/alerts", "method": "POST"}}),
    )
    .await;
}

async fn each_tenant_sees_and_changes_its_own_resources_alone(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let receiver = Receiver::start().await;
    let operator = server.client();
    operator.create("/tenants", &json!({"name": "acme"})).await;
    let acme = key_of(&operator, "acme", "admin").await;
    let own = key_of(&operator, "default", "write").await;

    register(&own, &receiver, "default").await;
    register(&acme, &receiver, "acme").await;
    let mut jobs = Vec::new();
    for (api, n) in [(&own, 1), (&acme, 2)] {
        let job = api.create("/jobs", &immediate("orders", "first", json!({"n": n}))).await;
        assert_eq!(job["endpoint"], "orders", "shown as the tenant names it: {job}");
        assert_eq!(job["tenant"], if n == 1 { "default" } else { "acme" }, "{job}");
        let execution = job["execution"]["execution_id"].as_str().unwrap().to_owned();
        wait_for_status(api, &execution, "SUCCESS").await;
        jobs.push((job["job_id"].as_str().unwrap().to_owned(), execution));
    }
    // The logs name the tenant each request and each delivery acted within.
    let logs = server.output_text();
    let of_acme = |l: &&str| l.contains(r#""tenant":"acme""#);
    assert!(logs.lines().filter(of_acme).any(|l| l.contains("Request handled.")), "{logs}");
    assert!(logs.lines().filter(of_acme).any(|l| l.contains(r#""name":"attempt""#)), "{logs}");

    // Each delivery was made with its own tenant's config and secret.
    let received = receiver.received();
    let seen: Vec<(String, String)> =
        received.iter().map(|r| (r.header("x-tenant").unwrap(), r.header("authorization").unwrap())).collect();
    assert_eq!(
        seen,
        [
            ("default".to_owned(), "Bearer secret-of-default".to_owned()),
            ("acme".to_owned(), "Bearer secret-of-acme".to_owned())
        ]
    );

    // The metrics name each tenant's endpoint within its tenant.
    let metrics = Client::new(&server.base_url, None).get("/metrics").await.text;
    for tenant in ["default", "acme"] {
        let labels = [format!(r#"tenant="{tenant}""#), r#"endpoint="orders""#.to_owned()];
        assert!(
            metrics.lines().any(|l| l.starts_with("taskexec_executions_finished_total")
                && labels.iter().all(|label| l.contains(label.as_str()))),
            "{labels:?} in:\n{metrics}"
        );
    }

    // Every list holds the tenant's own, shown under the names it gave.
    for (api, tenant, (job_id, execution_id)) in [(&own, "default", &jobs[0]), (&acme, "acme", &jobs[1])] {
        for (path, name) in
            [("/payload-specs", "orders"), ("/configs", "orders"), ("/secrets", "token"), ("/endpoints", "orders")]
        {
            let (items, _) = api.list_all(path, 10).await;
            let names: Vec<&str> = items.iter().filter_map(|i| i["name"].as_str()).collect();
            assert!(names.contains(&name) && names.iter().all(|n| !n.contains('/')), "{tenant} {path}: {names:?}");
        }
        assert_eq!(api.get("/configs/orders").await.body["values"]["tenant"], tenant);
        let endpoint = api.get("/endpoints/orders").await.body;
        assert_eq!((endpoint["config"].as_str(), endpoint["payload_spec"].as_str()), (Some("orders"), Some("orders")));
        let (listed, _) = api.list_all("/jobs", 10).await;
        assert_eq!(listed.iter().map(|j| j["job_id"].as_str().unwrap()).collect::<Vec<_>>(), [job_id.as_str()]);
        for path in ["/executions", "/executions?endpoint=orders", "/executions?status=SUCCESS"] {
            let items = api.get(path).await.body["items"].clone();
            let ids: Vec<&str> =
                items.as_array().unwrap().iter().map(|e| e["execution_id"].as_str().unwrap()).collect();
            assert_eq!(ids, [execution_id.as_str()], "{tenant} {path}");
        }
        let listed = api.get("/jobs?endpoint=orders").await.body["items"].clone();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{tenant}");
    }

    // The other tenant's ids are not found by any route, and nothing of them changes.
    let (their_job, their_execution) = &jobs[0];
    for path in [
        format!("/jobs/{their_job}"),
        format!("/jobs/{their_job}/status"),
        format!("/jobs/{their_job}/executions"),
        format!("/jobs/{their_job}/versions"),
        format!("/jobs/{their_job}/upcoming"),
    ] {
        acme.get(&path).await.error(404, "JOB_NOT_FOUND");
    }
    for path in [format!("/jobs/{their_job}/cancel"), format!("/jobs/{their_job}/trigger")] {
        acme.post(&path, &json!({})).await.error(404, "JOB_NOT_FOUND");
    }
    acme.delete(&format!("/jobs/{their_job}")).await.error(404, "JOB_NOT_FOUND");
    for path in [
        format!("/executions/{their_execution}"),
        format!("/executions/{their_execution}/attempts"),
        format!("/executions/{their_execution}/logs"),
    ] {
        acme.get(&path).await.error(404, "EXECUTION_NOT_FOUND");
    }
    for path in [format!("/executions/{their_execution}/cancel"), format!("/executions/{their_execution}/retry")] {
        acme.post(&path, &json!({})).await.error(404, "EXECUTION_NOT_FOUND");
    }
    // The default tenant's failed execution is not the other's to replay.
    own.create(
        "/endpoints",
        &json!({"name": "broken", "type": "HTTP", "config": "orders", "retry_policy": {"max_attempts": 1},
                "spec": {"url": "{{config.base_url}}/echo/500", "method": "POST"}}),
    )
    .await;
    let failing = own.create("/jobs", &immediate("broken", "fails", json!({}))).await;
    wait_for_status(&own, failing["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    let replayed = acme.post("/executions/replay", &json!({"status": "FAILED"})).await;
    assert_eq!(replayed.body["queued"], 0, "{}", replayed.text);
    assert!(acme.get("/executions?status=FAILED").await.body["items"].as_array().unwrap().is_empty());
    acme.post("/executions/replay", &json!({"endpoint": "broken"})).await.error(404, "ENDPOINT_NOT_FOUND");
    let replayed = own.post("/executions/replay", &json!({"status": "FAILED"})).await;
    assert_eq!(replayed.body["queued"], 1, "its own tenant's replay finds it: {}", replayed.text);
    assert_eq!(own.get(&format!("/jobs/{their_job}")).await.status, 200, "still there, unchanged");

    // Names the other tenant has and this one does not are not found either.
    own.create("/configs", &json!({"name": "only-default", "values": {}})).await;
    own.create("/secrets", &json!({"name": "only_default", "value": "x"})).await;
    acme.get("/configs/only-default").await.error(404, "CONFIG_NOT_FOUND");
    acme.delete("/configs/only-default").await.error(404, "CONFIG_NOT_FOUND");
    acme.put("/secrets/only_default", &json!({"value": "stolen"})).await.error(404, "SECRET_NOT_FOUND");
    let refused = acme
        .post(
            "/endpoints",
            &json!({"name": "thief", "type": "HTTP", "config": "only-default",
                    "spec": {"url": "http://127.0.0.1:9/", "method": "POST"}}),
        )
        .await;
    refused.error(422, "INVALID_CONFIG_REF");
    let refused = acme
        .post(
            "/endpoints",
            &json!({"name": "thief", "type": "HTTP",
                    "spec": {"url": "http://127.0.0.1:9/", "method": "POST",
                             "headers": {"Authorization": "{{secret.only_default}}"}}}),
        )
        .await;
    refused.error(422, "TEMPLATE_RESOLUTION_FAILED");
    let refused = acme
        .post(
            "/jobs",
            &json!({"endpoint": "orders", "trigger": "IMMEDIATE",
        "idempotency_key": "cb", "input": {"n": 3}, "on_failure": "only-default"}),
        )
        .await;
    refused.error(422, "INVALID_ENDPOINT_REF");

    // A change by one tenant leaves the other's same-named resource as it was.
    acme.put("/configs/orders", &json!({"values": {"base_url": receiver.base_url, "tenant": "acme-2"}})).await;
    assert_eq!(own.get("/configs/orders").await.body["values"]["tenant"], "default");
    assert_eq!(acme.delete("/endpoints/alerts").await.status, 204);
    assert_eq!(own.get("/endpoints/alerts").await.status, 200);
    let message = acme.delete("/configs/orders").await.error(409, "CONFLICT");
    assert!(message.contains("orders") && !message.contains('/'), "its own endpoint, by its own name: {message}");

    // Plugins are the operator's, for every tenant to deliver through.
    let message = acme.send_raw(reqwest::Method::POST, "/plugins", Some("application/wasm"), vec![0; 8]).await;
    let message = message.error(403, "FORBIDDEN");
    assert!(message.contains("plugins"), "{message}");
    assert_eq!(acme.get("/plugins").await.status, 200);
}

async fn a_secret_s_envelope_opens_for_its_own_tenant_alone(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let receiver = Receiver::start().await;
    let operator = server.client();
    operator.create("/tenants", &json!({"name": "acme"})).await;
    let acme = key_of(&operator, "acme", "write").await;
    register(&operator, &receiver, "default").await;
    register(&acme, &receiver, "acme").await;

    // The default tenant's ciphertext copied onto acme's secret of the same name (what a
    // tampered database, or a restore into the wrong row, would hold) does not open there.
    db.execute(
        "UPDATE secrets SET encrypted_value = (SELECT encrypted_value FROM secrets WHERE name = 'token')
         WHERE name = 'acme/token'",
    )
    .await;
    let job = acme.create("/jobs", &immediate("orders", "copied", json!({"n": 1}))).await;
    let execution = wait_for_status(&acme, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    let attempts: Value =
        acme.get(&format!("/executions/{}/attempts", execution["execution_id"].as_str().unwrap())).await.body;
    let error = attempts["items"][0]["error"].to_string();
    assert!(error.contains("token") && error.contains("cannot be opened"), "{error}");
    assert!(receiver.received().is_empty(), "nothing was sent with the other tenant's secret");
}

/// An HTTP endpoint `name` of the caller's tenant that nothing will be delivered to in time.
async fn endpoint(api: &Client, name: &str) -> crate::support::server::Response {
    api.post(
        "/endpoints",
        &json!({"name": name, "type": "HTTP", "spec": {"url": "http://127.0.0.1:9/", "method": "POST"}}),
    )
    .await
}

/// A DELAYED job an hour from now: unfinished for as long as the test runs.
fn later(endpoint: &str, key: &str) -> Value {
    json!({"endpoint": endpoint, "trigger": "DELAYED", "delay_ms": 3_600_000, "idempotency_key": key, "input": {}})
}

async fn quotas_hold_at_their_edges(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let operator = server.client();
    operator.create("/tenants", &json!({"name": "acme"})).await;
    let acme = key_of(&operator, "acme", "admin").await;

    // Set by operator keys alone, as a merge patch; a bad limit is refused naming it.
    let quotas = json!({"endpoints": 2, "active_cron_jobs": 1, "min_cron_interval_sec": 60,
                        "unfinished_executions": 3, "max_input_bytes": 100});
    let message = acme.send(reqwest::Method::PATCH, "/tenants/acme", Some(&json!({"quotas": quotas}))).await;
    message.error(403, "FORBIDDEN");
    let patched = operator.send(reqwest::Method::PATCH, "/tenants/acme", Some(&json!({"quotas": quotas}))).await;
    assert_eq!(patched.status.as_u16(), 200, "{}", patched.text);
    assert_eq!(patched.body["quotas"]["endpoints"], 2);
    let bad = operator.send(reqwest::Method::PATCH, "/tenants/acme", Some(&json!({"quotas": {"endpoints": -1}}))).await;
    assert!(bad.error(400, "INVALID_REQUEST").starts_with("`quotas.endpoints`"));
    operator
        .send(reqwest::Method::PATCH, "/tenants/beta", Some(&json!({"quotas": {}})))
        .await
        .error(404, "TENANT_NOT_FOUND");

    // Endpoints: two, and a repeat of one of them is still answered.
    for name in ["one", "two"] {
        assert_eq!(endpoint(&acme, name).await.status.as_u16(), 201);
    }
    let message = endpoint(&acme, "three").await.error(429, "QUOTA_EXCEEDED");
    assert!(message.contains("`endpoints`") && message.contains("acme") && message.contains('2'), "{message}");
    assert_eq!(endpoint(&acme, "one").await.status.as_u16(), 200, "an idempotent repeat");
    for name in ["one", "two", "three"] {
        assert_eq!(endpoint(&operator, name).await.status.as_u16(), 201, "the default tenant has no quota");
    }

    // A cron job's interval, and how many may be active.
    let cron = |expression: &str| json!({"endpoint": "one", "trigger": "CRON", "cron": expression, "timezone": "UTC"});
    let message = acme.post("/jobs", &cron("* * * * * *")).await.error(429, "QUOTA_EXCEEDED");
    assert!(message.contains("min_cron_interval_sec") && message.contains("1 s"), "{message}");
    let hourly = acme.create("/jobs", &cron("0 * * * *")).await;
    let message = acme.post("/jobs", &cron("30 * * * *")).await.error(429, "QUOTA_EXCEEDED");
    assert!(message.contains("active_cron_jobs"), "{message}");
    // An update is not one more, but is held to the interval.
    let path = format!("/jobs/{}", hourly["job_id"].as_str().unwrap());
    acme.put(&path, &json!({"cron": "*/10 * * * * *"})).await.error(429, "QUOTA_EXCEEDED");
    assert_eq!(acme.put(&path, &json!({"cron": "15 * * * *"})).await.status.as_u16(), 200);

    // One job's input.
    let big =
        json!({"endpoint": "one", "trigger": "IMMEDIATE", "idempotency_key": "big", "input": {"x": "y".repeat(200)}});
    let message = acme.post("/jobs", &big).await.error(429, "QUOTA_EXCEEDED");
    assert!(message.contains("max_input_bytes"), "{message}");

    // Unfinished executions: three, then none more, singly or by batch.
    for key in ["a", "b", "c"] {
        acme.create("/jobs", &later("one", key)).await;
    }
    let message = acme.post("/jobs", &later("one", "d")).await.error(429, "QUOTA_EXCEEDED");
    assert!(message.contains("unfinished_executions"), "{message}");
    let repeat = acme.post("/jobs", &later("one", "a")).await;
    assert_eq!(repeat.status.as_u16(), 200, "a repeat of a create made is answered as one: {}", repeat.text);
    acme.post("/jobs/batch", &json!({"jobs": [later("one", "e")]})).await.error(429, "QUOTA_EXCEEDED");

    let usage = acme.get("/tenants/acme/usage").await.body;
    assert_eq!(usage["endpoints"], json!({"limit": 2, "used": 2}), "{usage}");
    assert_eq!(usage["active_cron_jobs"], json!({"limit": 1, "used": 1}), "{usage}");
    assert_eq!(usage["unfinished_executions"], json!({"limit": 3, "used": 3}), "{usage}");
    assert_eq!(usage["max_input_bytes"], json!({"limit": 100, "used": null}), "{usage}");
    operator.get("/tenants/default/usage").await.body["endpoints"]["limit"].as_null().expect("no limit");
    acme.get("/tenants/default/usage").await.error(404, "TENANT_NOT_FOUND");

    // Lifting a limit (null) makes room at once; the create rate is a bucket per tenant.
    let lifted = json!({"quotas": {"unfinished_executions": null, "creates_per_second": 2}});
    assert_eq!(operator.send(reqwest::Method::PATCH, "/tenants/acme", Some(&lifted)).await.status.as_u16(), 200);
    let mut refused = None;
    for key in ["f", "g", "h", "i"] {
        let answer = acme.post("/jobs", &later("one", key)).await;
        if answer.status.as_u16() == 429 {
            refused = Some(answer);
            break;
        }
        assert_eq!(answer.status.as_u16(), 201, "{}", answer.text);
    }
    let refused = refused.expect("a third create within the second is over the rate");
    assert!(refused.headers.contains_key("retry-after"), "{:?}", refused.headers);
    assert!(refused.error(429, "RATE_LIMITED").contains("creates_per_second"));
    let message =
        acme.post("/jobs/batch", &json!({"jobs": [later("one", "j"), later("one", "k"), later("one", "l")]})).await;
    assert!(message.error(429, "RATE_LIMITED").contains("creates_per_second"), "a batch past the burst at once");
}

async fn a_tenant_is_deleted_with_all_it_holds_once_nothing_of_it_is_active(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let receiver = Receiver::start().await;
    let operator = server.client();
    operator.create("/tenants", &json!({"name": "acme"})).await;
    let acme = key_of(&operator, "acme", "admin").await;
    register(&operator, &receiver, "default").await;
    register(&acme, &receiver, "acme").await;
    let done = acme.create("/jobs", &immediate("orders", "done", json!({"n": 1}))).await;
    wait_for_status(&acme, done["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let waiting = acme.create("/jobs", &later("orders", "waiting")).await;

    acme.delete("/tenants/acme").await.error(403, "FORBIDDEN");
    let message = operator.delete("/tenants/acme").await.error(409, "CONFLICT");
    assert!(message.contains("1 unfinished execution"), "{message}");
    operator.delete("/tenants/default").await.error(409, "CONFLICT");
    operator.delete("/tenants/beta").await.error(404, "TENANT_NOT_FOUND");

    acme.post(&format!("/jobs/{}/cancel", waiting["job_id"].as_str().unwrap()), &json!({})).await;
    assert_eq!(operator.delete("/tenants/acme").await.status.as_u16(), 204);
    acme.get("/configs").await.error(401, "UNAUTHORIZED");
    operator.get("/tenants/acme").await.error(404, "TENANT_NOT_FOUND");
    for table in ["payload_specs", "configs", "secrets", "endpoints", "jobs"] {
        let column = if table == "jobs" { "endpoint" } else { "name" };
        let left = db.scalar(&format!("SELECT COUNT(*) FROM {table} WHERE {column} LIKE 'acme/%'")).await;
        assert_eq!(left, 0, "{table}");
    }
    assert_eq!(db.scalar("SELECT COUNT(*) FROM executions WHERE endpoint LIKE 'acme/%'").await, 0);
    assert_eq!(operator.get("/configs/orders").await.body["values"]["tenant"], "default", "the other's stays");

    // Made again, it starts empty.
    operator.create("/tenants", &json!({"name": "acme"})).await;
    let again = key_of(&operator, "acme", "read").await;
    assert!(again.get("/endpoints").await.body["items"].as_array().unwrap().is_empty());
}
