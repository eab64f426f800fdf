//! Recovering from a receiver's bad day and keeping the tables in hand: the dead-letter view,
//! retry and replay, failure callbacks, retention and deletes, batch creates, and flow control
//! (429 pauses, rate limits, the circuit breaker).

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    failed_executions_are_listed_retried_and_replayed,
    finished_history_is_purged_after_the_retention,
    jobs_and_endpoints_are_deleted_with_their_history_once_nothing_is_left_to_deliver,
    a_batch_creates_each_job_or_says_why_not,
    a_failed_execution_is_told_to_the_on_failure_endpoint_once,
    a_429_with_retry_after_pauses_the_whole_endpoint,
    a_rate_limited_endpoint_is_delivered_to_at_its_rate,
    a_failing_receiver_opens_the_circuit_and_a_good_probe_closes_it,
    an_endpoint_failing_too_long_is_disabled_announced_and_enabled,
);

fn ids(page: &Value) -> Vec<String> {
    page["items"].as_array().unwrap().iter().map(|e| e["execution_id"].as_str().unwrap().to_owned()).collect()
}

/// Point endpoint `name` (made by `http_endpoint`) at `path` on the receiver: the fix.
async fn repoint(api: &Client, name: &str, path: &str) {
    let mut endpoint = api.get(&format!("/endpoints/{name}")).await.body;
    let body = json!({
        "name": name, "type": "HTTP", "payload_spec": endpoint["payload_spec"], "config": endpoint["config"],
        "spec": {
            "url": format!("{{{{config.base_url}}}}{path}"), "method": "POST",
            "headers": endpoint["spec"]["headers"].take(), "body_template": endpoint["spec"]["body_template"].take(),
            "timeout_ms": 10000
        },
        "retry_policy": {"max_attempts": 1},
    });
    let updated = api.put(&format!("/endpoints/{name}"), &body).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
}

async fn failed_executions_are_listed_retried_and_replayed(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "broken", "/fail/broken", json!({"max_attempts": 1})).await;
    http_endpoint(&api, &receiver, "fine", "/ok/fine", json!(null)).await;
    let mut failed = Vec::new();
    for i in 0..3 {
        let job = api
            .create("/jobs", &immediate("broken", &format!("b-{i}"), json!({"user_id": format!("u{i}"), "amount": i})))
            .await;
        let id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
        wait_for_status(&api, &id, "FAILED").await;
        failed.push(id);
    }
    let fine = api.create("/jobs", &immediate("fine", "f-0", json!({"user_id": "u", "amount": 1}))).await;
    let fine_id = fine["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &fine_id, "SUCCESS").await;

    // The dead-letter view: failures across jobs, oldest first, a page at a time.
    let first_page = api.get("/executions?status=FAILED&limit=2").await.body;
    assert_eq!(ids(&first_page), failed[..2]);
    let cursor = first_page["cursor"].as_str().unwrap();
    let second_page = api.get(&format!("/executions?status=FAILED&limit=2&cursor={cursor}")).await.body;
    assert_eq!(ids(&second_page), failed[2..]);
    assert_eq!(second_page["cursor"], Value::Null);
    assert_eq!(ids(&api.get("/executions?endpoint=fine").await.body), [fine_id.as_str()]);
    let job_id = fine["job_id"].as_str().unwrap();
    assert_eq!(ids(&api.get(&format!("/executions?job_id={job_id}")).await.body), [fine_id.as_str()]);
    let before_all = "2000-01-01T00:00:00Z";
    assert_eq!(ids(&api.get(&format!("/executions?created_before={before_all}")).await.body), Vec::<String>::new());
    assert_eq!(
        ids(&api.get(&format!("/executions?created_after={before_all}&status=SUCCESS")).await.body),
        [fine_id.as_str()]
    );
    let message = api.get("/executions?status=DONE").await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`status`"), "{message}");
    let message = api
        .get("/executions?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z")
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("`created_before`"), "{message}");

    // Only a failed or cancelled execution can be retried.
    let refused = api.post(&format!("/executions/{fine_id}/retry"), &json!({})).await;
    let message = refused.error(409, "EXECUTION_NOT_RETRYABLE");
    assert!(message.contains("SUCCESS"), "{message}");
    api.post("/executions/exec_missing/retry", &json!({})).await.error(404, "EXECUTION_NOT_FOUND");

    // Fix the endpoint, then retry one: a new execution, delivered with the endpoint as it is now.
    repoint(&api, "broken", "/ok/fixed").await;
    let retried = api.post(&format!("/executions/{}/retry", failed[0]), &json!({})).await;
    assert_eq!(retried.status, 201, "{}", retried.text);
    assert_eq!(retried.body["retry_of"], failed[0].as_str());
    assert_eq!(retried.body["attempt_count"], 0);
    let retry_id = retried.body["execution_id"].as_str().unwrap().to_owned();
    assert_ne!(retry_id, failed[0]);
    let done = wait_for_status(&api, &retry_id, "SUCCESS").await;
    assert_eq!(done["input"], json!({"user_id": "u0", "amount": 0}));
    assert_eq!(receiver.count_of("/ok/fixed"), 1);
    // Asked again: the same retry, not another delivery.
    let again = api.post(&format!("/executions/{}/retry", failed[0]), &json!({})).await;
    assert_eq!((again.status.as_u16(), again.body["execution_id"].as_str()), (200, Some(retry_id.as_str())));
    // The old execution stays as the record.
    assert_eq!(api.get(&format!("/executions/{}", failed[0])).await.body["status"], "FAILED");

    // Replay by filter, a limited number at a time, never twice.
    for bad in [json!({"status": "SUCCESS"}), json!({"limit": 0}), json!({"limit": 1001}), json!({"since": "x"})] {
        api.post("/executions/replay", &bad).await.error(400, "INVALID_REQUEST");
    }
    api.post("/executions/replay", &json!({"endpoint": "nope"})).await.error(404, "ENDPOINT_NOT_FOUND");
    let one = api.post("/executions/replay", &json!({"endpoint": "broken", "limit": 1})).await;
    assert_eq!(one.status, 200, "{}", one.text);
    assert_eq!(one.body["queued"], 1);
    let rest = api.post("/executions/replay", &json!({"endpoint": "broken"})).await.body;
    assert_eq!(rest["queued"], 1);
    assert_eq!(api.post("/executions/replay", &json!({"endpoint": "broken"})).await.body["queued"], 0);
    let replayed: Vec<String> =
        [&one.body, &rest].iter().map(|b| b["execution_ids"][0].as_str().unwrap().to_owned()).collect();
    for (id, old) in replayed.iter().zip(&failed[1..]) {
        let execution = wait_for_status(&api, id, "SUCCESS").await;
        assert_eq!(execution["retry_of"], old.as_str(), "oldest first");
    }
    assert_eq!(receiver.count_of("/ok/fixed"), 3);
    assert_eq!(ids(&api.get("/executions?status=FAILED").await.body), failed, "the records stay");
}

async fn finished_history_is_purged_after_the_retention(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server =
        Server::start_with(&db, ServerOptions::new().env("TE_RETENTION", "2s").env("TE_PURGE_INTERVAL_SEC", "1")).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hook", "/ok/hook", json!(null)).await;
    let later = api
        .create(
            "/jobs",
            &json!({"endpoint": "hook", "trigger": "DELAYED", "idempotency_key": "later", "delay_ms": 3_600_000,
                                 "input": {"user_id": "u", "amount": 1}}),
        )
        .await;
    let done = api.create("/jobs", &immediate("hook", "done", json!({"user_id": "u", "amount": 1}))).await;
    let done_execution = done["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &done_execution, "SUCCESS").await;
    let attempts = format!("SELECT COUNT(*) FROM attempts WHERE execution_id = '{done_execution}'");
    assert_eq!(db.scalar(&attempts).await, 1);

    // Once older than TE_RETENTION, the finished execution goes with its attempts and logs, and
    // its one-shot job with it; what has not run yet stays.
    eventually("the finished job purged", Duration::from_secs(20), || async {
        api.get(&format!("/jobs/{}", done["job_id"].as_str().unwrap())).await.status == 404
    })
    .await;
    api.get(&format!("/executions/{done_execution}")).await.error(404, "EXECUTION_NOT_FOUND");
    assert_eq!(db.scalar(&attempts).await, 0);
    let logs = format!("SELECT COUNT(*) FROM execution_logs WHERE execution_id = '{done_execution}'");
    assert_eq!(db.scalar(&logs).await, 0);
    let waiting = api.get(&format!("/jobs/{}", later["job_id"].as_str().unwrap())).await;
    assert_eq!(waiting.body["execution"]["status"], "PENDING", "{}", waiting.text);
    let metrics = Client::new(&server.base_url, None).get("/metrics").await.text;
    assert!(metrics.contains("taskexec_retention_purged_total{kind=\"executions\"} 1"), "{metrics}");
}

async fn jobs_and_endpoints_are_deleted_with_their_history_once_nothing_is_left_to_deliver(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hook", "/ok/hook", json!(null)).await;
    let input = json!({"user_id": "u", "amount": 1});

    // A finished job goes with its execution.
    let done = api.create("/jobs", &immediate("hook", "done", input.clone())).await;
    let (done_job, done_execution) =
        (done["job_id"].as_str().unwrap().to_owned(), done["execution"]["execution_id"].as_str().unwrap().to_owned());
    wait_for_status(&api, &done_execution, "SUCCESS").await;
    assert_eq!(api.delete(&format!("/jobs/{done_job}")).await.status, 204);
    api.get(&format!("/jobs/{done_job}")).await.error(404, "JOB_NOT_FOUND");
    api.get(&format!("/executions/{done_execution}")).await.error(404, "EXECUTION_NOT_FOUND");
    api.delete(&format!("/jobs/{done_job}")).await.error(404, "JOB_NOT_FOUND");

    // One still to run is refused, naming its execution, until it is cancelled.
    let later = api
        .create("/jobs", &json!({"endpoint": "hook", "trigger": "DELAYED", "idempotency_key": "later", "delay_ms": 3_600_000, "input": input}))
        .await;
    let later_job = later["job_id"].as_str().unwrap();
    let message = api.delete(&format!("/jobs/{later_job}")).await.error(409, "CONFLICT");
    assert!(message.contains(later["execution"]["execution_id"].as_str().unwrap()), "{message}");
    // While it waits, the endpoint cannot go either.
    let message = api.delete("/endpoints/hook").await.error(409, "CONFLICT");
    assert!(message.contains(later_job), "{message}");
    api.post(&format!("/jobs/{later_job}/cancel"), &json!({})).await;
    assert_eq!(api.delete(&format!("/jobs/{later_job}")).await.status, 204);

    // An active cron job must be cancelled first; so must it before its endpoint goes.
    let cron = api
        .create(
            "/jobs",
            &json!({"endpoint": "hook", "trigger": "CRON", "cron": "0 9 * * MON", "timezone": "UTC", "input": input}),
        )
        .await;
    let cron_job = cron["job_id"].as_str().unwrap();
    let message = api.delete(&format!("/jobs/{cron_job}")).await.error(409, "CONFLICT");
    assert!(message.contains("cancel it first"), "{message}");
    let message = api.delete("/endpoints/hook").await.error(409, "CONFLICT");
    assert!(message.contains(cron_job), "{message}");
    api.post(&format!("/jobs/{cron_job}/cancel"), &json!({})).await;

    // Finished jobs no longer keep an endpoint: it goes, and their history with it.
    let kept = api.create("/jobs", &immediate("hook", "kept", input.clone())).await;
    wait_for_status(&api, kept["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(api.delete("/endpoints/hook").await.status, 204);
    api.get("/endpoints/hook").await.error(404, "ENDPOINT_NOT_FOUND");
    api.get(&format!("/jobs/{}", kept["job_id"].as_str().unwrap())).await.error(404, "JOB_NOT_FOUND");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM executions").await, 0);
}

async fn a_batch_creates_each_job_or_says_why_not(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hook", "/ok/hook", json!(null)).await;
    let input = |n: i64| json!({"user_id": format!("u{n}"), "amount": n});
    let jobs = json!([
        immediate("hook", "b-0", input(0)),
        immediate("hook", "b-1", input(1)),
        immediate("nope", "b-2", input(2)),
        {"endpoint": "hook", "trigger": "NOW", "idempotency_key": "b-3"},
        immediate("hook", "b-0", input(0)),
        immediate("hook", "b-1", input(99)),
        immediate("hook", "b-6", json!({"amount": 1})),
        {"endpoint": "hook", "trigger": "CRON", "cron": "0 9 * * MON", "timezone": "UTC", "input": input(7)},
    ]);
    let answer = api.post("/jobs/batch", &json!({"jobs": jobs})).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let body = &answer.body;
    let results: Vec<&str> = body["items"].as_array().unwrap().iter().map(|i| i["result"].as_str().unwrap()).collect();
    assert_eq!(results, ["created", "created", "error", "error", "existing", "error", "error", "created"], "{body}");
    assert_eq!(
        (body["created"].as_u64(), body["existing"].as_u64(), body["errors"].as_u64()),
        (Some(3), Some(1), Some(4))
    );
    let item = |i: usize| &body["items"][i];
    assert_eq!(item(2)["error"]["code"], "ENDPOINT_NOT_FOUND");
    assert_eq!(item(3)["error"]["code"], "INVALID_REQUEST");
    assert!(item(3)["error"]["message"].as_str().unwrap().contains("`trigger`"), "{}", item(3));
    assert_eq!(item(4)["job"]["job_id"], item(0)["job"]["job_id"], "a repeat in the batch finds the first");
    assert_eq!(item(5)["error"]["code"], "CONFLICT");
    assert_eq!(item(6)["error"]["code"], "INPUT_VALIDATION_FAILED");
    assert!(item(6)["error"]["details"].is_array(), "{}", item(6));
    assert_eq!(item(7)["job"]["trigger"], "CRON");
    // Each created one-shot job is delivered.
    for i in [0, 1] {
        wait_for_status(&api, item(i)["job"]["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    }
    // The same batch again: every valid item is an idempotent repeat (the cron job has no key).
    let again = api.post("/jobs/batch", &json!({"jobs": jobs})).await.body;
    assert_eq!((again["created"].as_u64(), again["existing"].as_u64()), (Some(1), Some(3)), "{again}");
    // A batch larger than PostgreSQL writes in one statement (32) is written the other way,
    // with the same answers: its last item repeats its first.
    let mut large: Vec<Value> = (0..40).map(|i| immediate("hook", &format!("l-{i}"), input(i))).collect();
    large.push(immediate("hook", "l-0", input(0)));
    let large = api.post("/jobs/batch", &json!({"jobs": large})).await.body;
    assert_eq!((large["created"].as_u64(), large["existing"].as_u64()), (Some(40), Some(1)), "{large}");
    assert_eq!(large["items"][40]["job"]["job_id"], large["items"][0]["job"]["job_id"]);
    // A created job answers as it reads back (the create does not read its row again): times
    // at the precision kept, the input as stored, the cron schedule as planned.
    let tomorrow = chrono::Utc::now() + chrono::Duration::days(1);
    let later = json!({"endpoint": "hook", "trigger": "DELAYED", "run_at": tomorrow.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
                       "idempotency_key": "t-1", "input": {"user_id": "u-t", "amount": 0.1, "big": 12345678901234567u64, "nested": {"b": [1, 2.5]}, "a": null}});
    let created = api.post("/jobs/batch", &json!({"jobs": [later]})).await.body;
    assert_eq!(created["created"], 1, "{created}");
    let single = api.create("/jobs", &immediate("hook", "t-2", input(1))).await;
    for mut job in [created["items"][0]["job"].clone(), item(7)["job"].clone(), single] {
        let mut read = api.get(&format!("/jobs/{}", job["job_id"].as_str().unwrap())).await.body;
        // The execution's status moves on; the job's own fields do not.
        for answer in [&mut job, &mut read] {
            answer.as_object_mut().unwrap().remove("execution");
        }
        assert_eq!(read, job, "as created, then as read back");
    }
    assert_eq!(
        created["items"][0]["job"]["run_at"],
        tomorrow.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "{created}"
    );
    // Bounds of the batch itself.
    api.post("/jobs/batch", &json!({"jobs": []})).await.error(400, "INVALID_REQUEST");
    let too_many: Vec<Value> = (0..1001).map(|i| immediate("hook", &format!("m-{i}"), input(1))).collect();
    let message = api.post("/jobs/batch", &json!({"jobs": too_many})).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`jobs`") && message.contains("1001"), "{message}");
    api.post("/jobs/batch", &json!({"job": []})).await.error(400, "INVALID_REQUEST");
}

async fn a_failed_execution_is_told_to_the_on_failure_endpoint_once(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "setup", "/ok/setup", json!(null)).await;
    let hook = |name: &str, path: &str, on_failure: Option<&str>| {
        let mut endpoint = json!({"name": name, "type": "HTTP", "retry_policy": {"max_attempts": 1}, "spec": {
            "url": format!("{}{path}", receiver.base_url), "method": "POST",
            "body_template": {"event": "{{input.event}}", "execution_id": "{{input.execution_id}}", "error": "{{input.error}}",
                              "attempts": "{{input.attempts}}"}}});
        if let Some(target) = on_failure {
            // The endpoints that fail send a fixed body: they fail at the receiver.
            endpoint["on_failure"] = json!(target);
            endpoint["spec"]["body_template"] = json!({"ping": true});
        }
        endpoint
    };
    api.create("/endpoints", &hook("alerts", "/ok/alerts", None)).await;
    api.create("/endpoints", &hook("pager", "/fail/pager", Some("alerts"))).await;
    api.create("/endpoints", &hook("broken", "/fail/broken", Some("alerts"))).await;
    assert_eq!(api.get("/endpoints/broken").await.body["on_failure"], "alerts");

    // A failure of `broken` reaches `alerts` with its summary.
    let job =
        api.create("/jobs", &json!({"endpoint": "broken", "trigger": "IMMEDIATE", "idempotency_key": "f1"})).await;
    let failed = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &failed, "FAILED").await;
    eventually("the alert", Duration::from_secs(20), || async { receiver.count_of("/ok/alerts") == 1 }).await;
    let alert = receiver.received().into_iter().find(|r| r.path == "/ok/alerts").unwrap().json();
    assert_eq!(alert["event"], "execution.failed");
    assert_eq!(alert["execution_id"], failed.as_str());
    assert_eq!(alert["error"]["type"], "HTTP_ERROR", "{alert}");
    assert_eq!(alert["attempts"], 1);
    let callbacks = api.get("/jobs?endpoint=alerts").await.body;
    assert_eq!(callbacks["items"][0]["idempotency_key"], format!("on_failure:{failed}"));

    // A job may name its own callback; a callback's own failure is not announced (no loops).
    let job = api
        .create(
            "/jobs",
            &json!({"endpoint": "broken", "trigger": "IMMEDIATE", "idempotency_key": "f2", "on_failure": "pager"}),
        )
        .await;
    assert_eq!(job["on_failure"], "pager");
    wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    eventually("the pager's callback failed and handled", Duration::from_secs(20), || async {
        let handled = "SELECT COUNT(*) FROM executions WHERE endpoint = 'pager' AND status = 'FAILED' AND failure_handled_at IS NOT NULL";
        db.scalar(handled).await == 1
    })
    .await;
    assert_eq!(receiver.count_of("/fail/pager"), 1);
    let alert_jobs = api.get("/jobs?endpoint=alerts").await.body["items"].as_array().unwrap().len();
    assert_eq!(alert_jobs, 1, "the pager's failure is not told to alerts");

    // Refused: a callback to itself, to nothing; deleting an endpoint others call on failure.
    let message =
        api.post("/endpoints", &hook("selfish", "/ok/s", Some("selfish"))).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("`on_failure`"), "{message}");
    let message =
        api.post("/endpoints", &hook("lost", "/ok/s", Some("nowhere"))).await.error(422, "INVALID_ENDPOINT_REF");
    assert!(message.contains("nowhere"), "{message}");
    let refused = api
        .post(
            "/jobs",
            &json!({"endpoint": "broken", "trigger": "IMMEDIATE", "idempotency_key": "f3", "on_failure": "nowhere"}),
        )
        .await;
    refused.error(422, "INVALID_ENDPOINT_REF");
    let message = api.delete("/endpoints/alerts").await.error(409, "CONFLICT");
    assert!(message.contains("broken") && message.contains("pager"), "{message}");
}

async fn a_429_with_retry_after_pauses_the_whole_endpoint(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({"name": "busy", "type": "HTTP", "retry_policy": {"max_attempts": 3, "initial_delay_ms": 100},
                "spec": {"url": format!("{}/throttle/busy/1/2", receiver.base_url), "method": "POST"}}),
    )
    .await;
    // The first delivery is told to come back in 2 s.
    let first = api.create("/jobs", &json!({"endpoint": "busy", "trigger": "IMMEDIATE", "idempotency_key": "a"})).await;
    eventually("the 429", Duration::from_secs(20), || async { receiver.count() == 1 }).await;
    let refused_at = receiver.arrivals()[0];
    eventually("the endpoint paused", Duration::from_secs(20), || async {
        api.get("/endpoints/busy").await.body["paused_until"].is_string()
    })
    .await;
    // Another job of the endpoint waits for the pause, not only the refused one.
    let second =
        api.create("/jobs", &json!({"endpoint": "busy", "trigger": "IMMEDIATE", "idempotency_key": "b"})).await;
    for job in [&first, &second] {
        let execution = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
        assert!(time(&execution["completed_at"]) - refused_at >= chrono::Duration::milliseconds(1900), "{execution}");
    }
    let arrivals = receiver.arrivals();
    assert_eq!(arrivals.len(), 3, "one refusal, then both delivered");
    assert!(arrivals[1..].iter().all(|at| *at - refused_at >= chrono::Duration::milliseconds(1900)), "{arrivals:?}");
    let logs =
        api.get(&format!("/executions/{}/logs", first["execution"]["execution_id"].as_str().unwrap())).await.text;
    assert!(logs.contains("endpoint 'busy' pauses until"), "{logs}");
    assert_eq!(api.get("/endpoints/busy").await.body["paused_until"], Value::Null, "shown only while it holds");
}

fn time(value: &Value) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap()).unwrap().with_timezone(&chrono::Utc)
}

/// The most deliveries that arrived within any `window` of each other.
pub fn most_within(arrivals: &[chrono::DateTime<chrono::Utc>], window: chrono::Duration) -> usize {
    let mut sorted = arrivals.to_vec();
    sorted.sort();
    (0..sorted.len()).map(|i| sorted[i..].iter().take_while(|t| **t - sorted[i] < window).count()).max().unwrap_or(0)
}

async fn a_rate_limited_endpoint_is_delivered_to_at_its_rate(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let endpoint = api
        .create(
            "/endpoints",
            &json!({"name": "metered", "type": "HTTP", "rate_limit": {"per_second": 5},
                    "spec": {"url": format!("{}/ok/metered", receiver.base_url), "method": "POST"}}),
        )
        .await;
    assert_eq!(
        endpoint["rate_limit"],
        json!({"per_second": 5.0, "burst": 5}),
        "the burst defaults to a second's worth"
    );
    let updated = api
        .put(
            "/endpoints/metered",
            &json!({"type": "HTTP", "rate_limit": {"per_second": 5, "burst": 1},
                    "spec": {"url": format!("{}/ok/metered", receiver.base_url), "method": "POST"}}),
        )
        .await;
    assert_eq!(updated.body["rate_limit"]["burst"], 1, "{}", updated.text);
    let jobs = (0..12)
        .map(|i| json!({"endpoint": "metered", "trigger": "IMMEDIATE", "idempotency_key": format!("m{i}")}))
        .collect::<Vec<_>>();
    let created = api.post("/jobs/batch", &json!({"jobs": jobs})).await.body;
    for item in created["items"].as_array().unwrap() {
        let execution =
            wait_for_status(&api, item["job"]["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
        assert_eq!(execution["attempt_count"], 1, "waiting is not an attempt: {execution}");
    }
    let arrivals = receiver.arrivals();
    let spread = *arrivals.iter().max().unwrap() - *arrivals.iter().min().unwrap();
    assert!(spread >= chrono::Duration::milliseconds(2000), "12 at 5 a second take over 2 s, took {spread}");
    assert!(most_within(&arrivals, chrono::Duration::seconds(1)) <= 6, "{arrivals:?}");
    for bad in
        [json!({"per_second": 0}), json!({"per_second": -1}), json!({"per_second": 5, "burst": 0}), json!({"burst": 3})]
    {
        let body = json!({"name": "x", "type": "HTTP", "rate_limit": bad, "spec": {"url": "http://127.0.0.1:9/", "method": "POST"}});
        let message = api.post("/endpoints", &body).await.error(400, "INVALID_REQUEST");
        assert!(message.contains("rate_limit"), "{message}");
    }
}

/// The value of the metric line that starts with `name{` and holds every one of `labels`.
fn metric(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|label| l.contains(label)))
        .find_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse().ok()))
}

async fn a_failing_receiver_opens_the_circuit_and_a_good_probe_closes_it(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    // The receiver fails its first four requests. One delivery at a time, so the order of
    // events is the receiver's order.
    let endpoint = api
        .create(
            "/endpoints",
            &json!({"name": "shaky", "type": "HTTP", "max_concurrency": 1,
                    "retry_policy": {"max_attempts": 10, "backoff": "fixed", "initial_delay_ms": 50},
                    "circuit_breaker": {"failure_threshold": 3, "cooldown_ms": 1000, "max_cooldown_ms": 4000},
                    "spec": {"url": format!("{}/flaky/shaky/4", receiver.base_url), "method": "POST"}}),
        )
        .await;
    assert_eq!(endpoint["circuit"], json!({"state": "closed", "consecutive_failures": 0}));
    assert_eq!(
        endpoint["circuit_breaker"],
        json!({"failure_threshold": 3, "cooldown_ms": 1000, "max_cooldown_ms": 4000, "auto_disable_after": null})
    );
    let jobs = (0..3)
        .map(|i| json!({"endpoint": "shaky", "trigger": "IMMEDIATE", "idempotency_key": format!("s{i}")}))
        .collect::<Vec<_>>();
    let created = api.post("/jobs/batch", &json!({"jobs": jobs})).await.body;
    eventually("the circuit opens", Duration::from_secs(20), || async {
        api.get("/endpoints/shaky").await.body["circuit"]["state"] == "open"
    })
    .await;
    let open = api.get("/endpoints/shaky").await.body["circuit"].clone();
    assert!(open["consecutive_failures"].as_i64().unwrap() >= 3, "{open}");
    assert!(open["last_error"].as_str().unwrap().contains("503"), "{open}");
    assert!(open["open_until"].is_string() && open["failing_since"].is_string(), "{open}");

    let mut attempts = 0;
    for item in created["items"].as_array().unwrap() {
        let execution =
            wait_for_status(&api, item["job"]["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
        attempts += execution["attempt_count"].as_i64().unwrap();
    }
    // Three failures open it; after 1 s one probe fails (open again for 2 s); the next probe
    // succeeds and the rest follow. Nothing was sent, and no attempt spent, while it was open.
    let arrivals = receiver.arrivals();
    assert_eq!(arrivals.len(), 7, "3 failures, 2 probes, then the other two: {arrivals:?}");
    assert_eq!(attempts, 7, "one attempt per request");
    let gap = |i: usize| arrivals[i] - arrivals[i - 1];
    assert!(gap(3) >= chrono::Duration::milliseconds(950), "the first cool-down: {}", gap(3));
    assert!(gap(4) >= chrono::Duration::milliseconds(1950), "doubled after the failed probe: {}", gap(4));
    let closed = api.get("/endpoints/shaky").await.body;
    assert_eq!(closed["circuit"], json!({"state": "closed", "consecutive_failures": 0}), "{closed}");
    let metrics = api.get("/metrics").await.text;
    let opened =
        metric(&metrics, "taskexec_endpoint_circuit_transitions_total", &[r#"endpoint="shaky""#, r#"state="open""#]);
    assert_eq!(opened, Some(2.0), "opened, then opened again by the failed probe");

    // Out of bounds, each named.
    for (bad, field) in [
        (json!({"failure_threshold": 1001}), "failure_threshold"),
        (json!({"cooldown_ms": 10}), "cooldown_ms"),
        (json!({"cooldown_ms": 5000, "max_cooldown_ms": 1000}), "max_cooldown_ms"),
        (json!({"auto_disable_after": "soon"}), "auto_disable_after"),
        (json!({"auto_disable_after": "0s"}), "auto_disable_after"),
    ] {
        let body = json!({"name": "x", "type": "HTTP", "circuit_breaker": bad,
                          "spec": {"url": "http://127.0.0.1:9/", "method": "POST"}});
        let message = api.post("/endpoints", &body).await.error(400, "INVALID_REQUEST");
        assert!(message.contains(&format!("circuit_breaker.{field}")), "{message}");
    }
}

async fn an_endpoint_failing_too_long_is_disabled_announced_and_enabled(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({"name": "pager", "type": "HTTP", "spec": {"url": format!("{}/ok/pager", receiver.base_url), "method": "POST",
                "body_template": {"event": "{{input.event}}", "endpoint": "{{input.endpoint}}",
                                  "failures": "{{input.consecutive_failures}}", "last_error": "{{input.last_error}}"}}}),
    )
    .await;
    api.create(
        "/endpoints",
        &json!({"name": "doomed", "type": "HTTP", "on_failure": "pager",
                "retry_policy": {"max_attempts": 100, "backoff": "fixed", "initial_delay_ms": 50},
                "circuit_breaker": {"failure_threshold": 2, "cooldown_ms": 200, "max_cooldown_ms": 200, "auto_disable_after": "1s"},
                "spec": {"url": format!("{}/switch/doomed", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let job = api.create("/jobs", &json!({"endpoint": "doomed", "trigger": "IMMEDIATE", "idempotency_key": "d"})).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    eventually("the endpoint is disabled", Duration::from_secs(20), || async {
        api.get("/endpoints/doomed").await.body["disabled_at"].is_string()
    })
    .await;
    eventually("the pager is told", Duration::from_secs(20), || async { receiver.count_of("/ok/pager") == 1 }).await;
    let told = receiver.received().into_iter().find(|r| r.path == "/ok/pager").unwrap().json();
    assert_eq!((&told["event"], &told["endpoint"]), (&json!("endpoint.disabled"), &json!("doomed")), "{told}");
    assert!(told["failures"].as_i64().unwrap() >= 2 && told["last_error"].as_str().unwrap().contains("503"), "{told}");
    let execution = api.get(&format!("/executions/{execution_id}")).await.body;
    assert!(matches!(execution["status"].as_str(), Some("RETRYING" | "QUEUED")), "it waits, not fails: {execution}");
    let metrics = api.get("/metrics").await.text;
    let state = metric(&metrics, "taskexec_endpoint_circuit_state", &[r#"endpoint="doomed""#, r#"state="disabled""#]);
    assert_eq!(state, Some(1.0), "{metrics}");

    // While disabled nothing is sent: give a wrong claim several cool-downs' time to show.
    let sent = receiver.count_of("/switch/doomed");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(receiver.count_of("/switch/doomed"), sent, "nothing is delivered while disabled");

    receiver.heal("doomed");
    let enabled = api.post("/endpoints/doomed/enable", &json!({})).await;
    assert_eq!(enabled.status, 200, "{}", enabled.text);
    assert_eq!(enabled.body["circuit"], json!({"state": "closed", "consecutive_failures": 0}));
    assert!(enabled.body.get("disabled_at").is_none(), "{}", enabled.text);
    wait_for_status(&api, &execution_id, "SUCCESS").await;
    assert_eq!(receiver.count_of("/ok/pager"), 1, "announced once");
    api.post("/endpoints/nope/enable", &json!({})).await.error(404, "ENDPOINT_NOT_FOUND");
}

/// Where the server's autovacuum does not run (or with `TE_VACUUM=always`, as here, wherever it
/// does), the scheduler vacuums the queue's tables once deliveries have left enough dead rows
/// behind: a queue does not slow down as its history piles up. (PostgreSQL only: SQLite reuses
/// deleted pages by itself.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_vacuums_the_queues_tables_as_deliveries_leave_dead_rows() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_VACUUM", "always")).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hook", "/ok/hook", json!(null)).await;
    // Each delivery leaves two dead row versions (its claim and its result): 3,000 leave 6,000,
    // past the 2,000 rows and 1% that make a table due.
    for from in (0..3000).step_by(1000) {
        let jobs: Vec<Value> = (from..from + 1000)
            .map(|i| immediate("hook", &format!("k{i}"), json!({"user_id": "u", "amount": 1})))
            .collect();
        let created = api.post("/jobs/batch", &json!({ "jobs": jobs })).await;
        assert!(created.status.is_success(), "{}", created.text);
    }
    let unfinished = "SELECT COUNT(*) FROM executions WHERE status <> 'SUCCESS'";
    // The queue's churn is all in the partition of unfinished executions (store/partitions.rs).
    let vacuumed = "SELECT COUNT(*) FROM pg_stat_user_tables
                    WHERE relname = 'executions_live' AND last_vacuum IS NOT NULL AND last_analyze IS NOT NULL";
    let mut done = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while std::time::Instant::now() < deadline {
        if db.scalar(unfinished).await == 0 && db.scalar(vacuumed).await == 1 {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(done, "every delivery made and `executions_live` vacuumed within 90 s");
    assert_eq!(receiver.count(), 3000);
}
