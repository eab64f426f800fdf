//! Jobs end to end, in one `taskexec` process with every role: each trigger delivers to a real
//! receiver, and the recorded execution, attempts and logs match what the receiver saw.

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, kafka_consumer, next_record, wait_for_status, SECRET};
use crate::support::{eventually, Backend, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    immediate_job_delivers_and_records_everything,
    delayed_job_fires_after_run_at,
    retries_back_off_then_succeed_or_give_up,
    unresolvable_template_fails_at_once_without_retry,
    input_is_validated_against_the_payload_spec,
    cancel_and_update_follow_the_documented_api,
    a_delivery_in_flight_is_aborted_when_asked,
    endpoint_update_applies_to_future_jobs_only,
    cron_job_ticks_every_second_once_each,
    cron_tick_is_made_ahead_and_fires_at_its_time,
    redis_stream_job_delivers,
    delayed_job_delivers_to_redis,
    attempt_in_flight_shows_and_repeats_must_match,
);

async fn immediate_job_delivers_and_records_everything(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "welcome", "/ok/welcome", json!({"max_attempts": 3})).await;

    let job =
        api.create("/jobs", &immediate("welcome", "order-1234", json!({"user_id": "u_abc", "amount": 12.5}))).await;
    assert!(job["job_id"].as_str().unwrap().starts_with("job_"));
    assert_eq!(
        (job["trigger"].as_str(), job["status"].as_str(), job["version"].as_u64()),
        (Some("IMMEDIATE"), Some("ACTIVE"), Some(1))
    );
    assert_eq!((job["endpoint_type"].as_str(), job["execution"]["status"].as_str()), (Some("HTTP"), Some("QUEUED")));
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    assert!(execution_id.starts_with("exec_"));

    let execution = wait_for_status(&api, &execution_id, "SUCCESS").await;
    let seen = receiver.received();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.path, "/ok/welcome");
    assert_eq!(
        request.json(),
        json!({"user_id": "u_abc", "amount": 12.5, "sender": "noreply@example.com"}),
        "amount kept its number type"
    );
    assert_eq!(request.header("authorization").as_deref(), Some(format!("Bearer {SECRET}").as_str()));
    assert_eq!(request.header("idempotency-key").as_deref(), Some(execution_id.as_str()));

    assert_eq!(execution["output"], json!({"status_code": 200, "body": "OK"}));
    assert_eq!((execution["attempt_count"].as_u64(), execution["max_attempts"].as_u64()), (Some(1), Some(3)));
    assert!(execution["duration_ms"].is_number() && execution["completed_at"].is_string());
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    assert_eq!(attempts["items"].as_array().unwrap().len(), 1);
    assert_eq!(attempts["items"][0]["status"], "SUCCESS");
    assert_eq!(attempts["items"][0]["output"], execution["output"]);
    let logs = api.get(&format!("/executions/{execution_id}/logs")).await;
    let messages: Vec<&str> =
        logs.body["items"].as_array().unwrap().iter().map(|l| l["message"].as_str().unwrap()).collect();
    // A plain delivery is one line: its start, what it rendered, and how long it took.
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].starts_with("Attempt 1 of 3 started") && messages[0].contains(" Delivered in "),
        "{messages:?}"
    );
    for text in [
        &logs.text,
        &api.get(&format!("/executions/{execution_id}/attempts")).await.text,
        &api.get(&format!("/executions/{execution_id}")).await.text,
    ] {
        assert!(!text.contains(SECRET), "the secret leaked: {text}");
    }

    // The same create again: 200 with the first answer's body, and no second delivery.
    let repeat =
        api.post("/jobs", &immediate("welcome", "order-1234", json!({"user_id": "u_abc", "amount": 12.5}))).await;
    assert_eq!(repeat.status, 200);
    assert_eq!(repeat.body, job);
    let read = api.get(&format!("/jobs/{}", job["job_id"].as_str().unwrap())).await.body;
    assert_eq!(read["execution"]["status"], "SUCCESS", "a read shows the execution as it is now");
    let listed = api.get(&format!("/jobs/{}/executions?status=SUCCESS", job["job_id"].as_str().unwrap())).await.body;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(receiver.count(), 1);
    let status = api.get(&format!("/jobs/{}/status", job["job_id"].as_str().unwrap())).await.body;
    assert_eq!(status["health"], "HEALTHY");
    assert_eq!(status["stats"]["last_24h"]["succeeded"], 1);
    assert!(!server.stop().contains(SECRET), "the secret leaked into the server's logs");
}

/// An attempt in flight is listed as RUNNING; `delay_ms` schedules a DELAYED job; a repeated
/// idempotency key must come with the same request.
async fn attempt_in_flight_shows_and_repeats_must_match(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "slow", "/slow/3000", json!({"max_attempts": 1})).await;

    let job = api.create("/jobs", &immediate("slow", "k-slow", json!({"user_id": "u1", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &execution_id, "RUNNING").await;
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    let items = attempts["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{attempts}");
    assert_eq!(
        (&items[0]["status"], &items[0]["attempt_number"], &items[0]["attempt_id"]),
        (&json!("RUNNING"), &json!(1), &Value::Null)
    );
    assert!(items[0]["started_at"].is_string() && items[0]["completed_at"].is_null(), "{attempts}");
    wait_for_status(&api, &execution_id, "SUCCESS").await;
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    assert_eq!(attempts["items"].as_array().unwrap().len(), 1, "the recorded attempt replaces it: {attempts}");
    assert_eq!(attempts["items"][0]["status"], "SUCCESS");
    assert!(attempts["items"][0]["attempt_id"].as_str().unwrap().starts_with("att"), "{attempts}");

    // The same key with another input is refused, naming the field; the same request is not.
    let r = api.post("/jobs", &immediate("slow", "k-slow", json!({"user_id": "u2", "amount": 1}))).await;
    let message = r.error(409, "CONFLICT");
    assert!(message.contains("`input`") && message.contains("k-slow"), "{message}");
    assert_eq!(
        api.post("/jobs", &immediate("slow", "k-slow", json!({"user_id": "u1", "amount": 1}))).await.status,
        200
    );

    // delay_ms instead of run_at; a repeat with delay_ms is the same request.
    http_endpoint(&api, &receiver, "fast", "/ok/fast", json!({"max_attempts": 1})).await;
    let delayed = json!({"endpoint": "fast", "trigger": "DELAYED", "idempotency_key": "k-delay", "delay_ms": 400, "input": {"user_id": "u3", "amount": 1}});
    let before = chrono::Utc::now();
    let job = api.create("/jobs", &delayed).await;
    let run_at: chrono::DateTime<chrono::Utc> = job["run_at"].as_str().unwrap().parse().unwrap();
    assert!(run_at >= before + chrono::Duration::milliseconds(400), "run_at {run_at} is 400 ms after {before}");
    assert_eq!(api.post("/jobs", &delayed).await.body["job_id"], job["job_id"]);
    wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let both = json!({"endpoint": "fast", "trigger": "DELAYED", "idempotency_key": "k-both", "delay_ms": 1, "run_at": before, "input": {"user_id": "u4"}});
    assert!(api.post("/jobs", &both).await.error(400, "INVALID_REQUEST").contains("`delay_ms`"));
    let wrong = json!({"endpoint": "fast", "trigger": "IMMEDIATE", "idempotency_key": "k-imm", "delay_ms": 1});
    assert!(api.post("/jobs", &wrong).await.error(400, "INVALID_REQUEST").contains("`delay_ms`"));
}

async fn delayed_job_fires_after_run_at(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "reminder", "/ok/reminder", json!(null)).await;

    let run_at = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let job = api
        .create("/jobs", &json!({"endpoint": "reminder", "trigger": "DELAYED", "idempotency_key": "later", "run_at": run_at, "input": {"user_id": "u1", "amount": 1}}))
        .await;
    assert_eq!(job["execution"]["status"], "PENDING");
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    assert_eq!(api.get(&format!("/executions/{execution_id}")).await.body["status"], "PENDING");
    wait_for_status(&api, execution_id, "SUCCESS").await;
    let at = receiver.arrivals()[0];
    assert!(at >= run_at, "delivered at {at}, before run_at {run_at}");

    // A run_at in the past fires at once; one beyond the horizon is refused.
    let past = api
        .create(
            "/jobs",
            &json!({"endpoint": "reminder", "trigger": "DELAYED", "idempotency_key": "past",
            "run_at": chrono::Utc::now() - chrono::Duration::hours(1), "input": {"user_id": "u2", "amount": 1}}),
        )
        .await;
    assert_eq!(past["execution"]["status"], "QUEUED");
    wait_for_status(&api, past["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let msg = api
        .post(
            "/jobs",
            &json!({"endpoint": "reminder", "trigger": "DELAYED", "idempotency_key": "far",
            "run_at": chrono::Utc::now() + chrono::Duration::days(400), "input": {"user_id": "u3", "amount": 1}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`run_at`") && msg.contains("TE_MAX_SCHEDULE_AHEAD_DAYS"), "{msg}");
    api.post("/jobs", &json!({"endpoint": "reminder", "trigger": "DELAYED", "idempotency_key": "x", "input": {"user_id": "u", "amount": 1}})).await.error(400, "INVALID_REQUEST");
}

async fn retries_back_off_then_succeed_or_give_up(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let policy = json!({"max_attempts": 4, "backoff": "exponential", "initial_delay_ms": 300, "max_delay_ms": 5000});
    http_endpoint(&api, &receiver, "flaky", "/flaky/f1/2", policy).await;
    http_endpoint(
        &api,
        &receiver,
        "broken",
        "/fail/always",
        json!({"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 100}),
    )
    .await;

    let job = api.create("/jobs", &immediate("flaky", "k1", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "SUCCESS").await;
    assert_eq!(execution["attempt_count"], 3);
    let attempts =
        api.get(&format!("/executions/{execution_id}/attempts")).await.body["items"].as_array().unwrap().clone();
    let statuses: Vec<&str> = attempts.iter().map(|a| a["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["FAILED", "FAILED", "SUCCESS"]);
    assert_eq!(attempts[0]["error"]["type"], "HTTP_ERROR");
    assert_eq!(attempts[0]["error"]["status_code"], 503);
    // The receiver saw three requests, the gaps growing with the exponential backoff
    // (300 ms then 600 ms, each ±25%).
    let at: Vec<_> = receiver.received().iter().filter(|r| r.path.starts_with("/flaky")).map(|r| r.at).collect();
    assert_eq!(at.len(), 3);
    let (first_gap, second_gap) = (at[1] - at[0], at[2] - at[1]);
    assert!(first_gap >= chrono::Duration::milliseconds(225), "{first_gap}");
    assert!(second_gap > first_gap, "{first_gap} then {second_gap}");
    // Every request carried the same idempotency key: the execution id.
    assert!(receiver
        .received()
        .iter()
        .filter(|r| r.path.starts_with("/flaky"))
        .all(|r| r.header("idempotency-key").as_deref() == Some(execution_id)));

    let job = api.create("/jobs", &immediate("broken", "k2", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "FAILED").await;
    assert_eq!(execution["attempt_count"], 2);
    assert_eq!(execution["output"]["error"]["type"], "HTTP_ERROR");
    assert_eq!(execution["output"]["error"]["status_code"], 500);
    let logs = api.get(&format!("/executions/{execution_id}/logs")).await.text;
    assert!(logs.contains("no attempts left (2 of 2)"), "{logs}");
    let status = api.get(&format!("/jobs/{}/status", job["job_id"].as_str().unwrap())).await.body;
    assert_eq!(status["health"], "FAILING");
}

async fn unresolvable_template_fails_at_once_without_retry(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "needs-amount", "/ok/x", json!({"max_attempts": 5})).await;
    // Valid for the payload spec (amount is optional there) but the template needs it.
    let job = api.create("/jobs", &immediate("needs-amount", "k", json!({"user_id": "u"}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "FAILED").await;
    assert_eq!(execution["attempt_count"], 1, "no retry");
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    let error = &attempts["items"][0]["error"];
    assert_eq!(error["type"], "TEMPLATE_RESOLUTION_FAILED");
    assert_eq!(error["variable"], "input.amount");
    assert_eq!(receiver.count(), 0, "nothing was sent");
}

async fn input_is_validated_against_the_payload_spec(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "strict", "/ok/x", json!(null)).await;
    let r = api.post("/jobs", &immediate("strict", "k", json!({"amount": "lots"}))).await;
    let msg = r.error(422, "INPUT_VALIDATION_FAILED");
    assert!(msg.contains("user_id") && msg.contains("/amount"), "{msg}");
    let details = r.body["error"]["details"].as_array().unwrap();
    let paths: Vec<&str> = details.iter().map(|d| d["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/") && paths.contains(&"/amount"), "{paths:?}");
    api.post("/jobs", &immediate("no-such-endpoint", "k", json!({}))).await.error(404, "ENDPOINT_NOT_FOUND");
    let msg = api
        .post("/jobs", &json!({"endpoint": "strict", "trigger": "IMMEDIATE", "input": {"user_id": "u"}}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`idempotency_key`"), "{msg}");
    let msg = api
        .post("/jobs", &json!({"endpoint": "strict", "trigger": "SOMETIMES", "idempotency_key": "k"}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`trigger`"), "{msg}");
    assert_eq!(api.get("/jobs").await.body["items"], json!([]), "nothing was created");
}

async fn cancel_and_update_follow_the_documented_api(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "e", "/ok/e", json!(null)).await;
    http_endpoint(&api, &receiver, "slow", "/slow-once/s1/3000", json!(null)).await;

    // A delayed job not yet due is cancelled with its execution; cancelling again is harmless.
    let later = api
        .create("/jobs", &json!({"endpoint": "e", "trigger": "DELAYED", "idempotency_key": "d", "run_at": chrono::Utc::now() + chrono::Duration::hours(1), "input": {"user_id": "u", "amount": 1}}))
        .await;
    let job_id = later["job_id"].as_str().unwrap();
    let cancelled = api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert_eq!(
        (cancelled.body["status"].as_str(), cancelled.body["execution"]["status"].as_str()),
        (Some("RETIRED"), Some("CANCELLED"))
    );
    assert_eq!(api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await.status, 200);
    // One-shot jobs cannot be updated.
    api.put(&format!("/jobs/{job_id}"), &json!({"input": {}})).await.error(409, "JOB_NOT_UPDATABLE");

    // Running: 409; done: 409.
    let slow = api.create("/jobs", &immediate("slow", "s", json!({"user_id": "u", "amount": 1}))).await;
    let slow_exec = slow["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&api, slow_exec, "RUNNING").await;
    api.post(&format!("/jobs/{}/cancel", slow["job_id"].as_str().unwrap()), &json!({}))
        .await
        .error(409, "EXECUTION_NOT_CANCELLABLE");
    api.post(&format!("/executions/{slow_exec}/cancel"), &json!({})).await.error(409, "EXECUTION_NOT_CANCELLABLE");
    wait_for_status(&api, slow_exec, "SUCCESS").await;
    api.post(&format!("/jobs/{}/cancel", slow["job_id"].as_str().unwrap()), &json!({}))
        .await
        .error(409, "EXECUTION_NOT_CANCELLABLE");
    api.get("/jobs/job_missing").await.error(404, "JOB_NOT_FOUND");
    api.get("/executions/exec_missing").await.error(404, "EXECUTION_NOT_FOUND");

    // A cron job is updated by a new version that retires the old one.
    let cron = api
        .create("/jobs", &json!({"endpoint": "e", "trigger": "CRON", "cron": "0 9 * * MON", "timezone": "Asia/Kolkata", "input": {"user_id": "u", "amount": 1}}))
        .await;
    let v1 = cron["job_id"].as_str().unwrap().to_owned();
    assert!(cron["next_run_at"].as_str().unwrap().ends_with("T09:00:00+05:30"), "{}", cron["next_run_at"]);
    let v2 = api
        .put(&format!("/jobs/{v1}"), &json!({"cron": "0 10 * * MON", "input": {"user_id": "u2", "amount": 1}}))
        .await;
    assert_eq!(v2.status, 200, "{}", v2.text);
    assert_eq!((v2.body["version"].as_u64(), v2.body["previous_version_id"].as_str()), (Some(2), Some(v1.as_str())));
    assert!(v2.body["next_run_at"].as_str().unwrap().ends_with("T10:00:00+05:30"));
    let old = api.get(&format!("/jobs/{v1}")).await.body;
    assert_eq!((old["status"].as_str(), old["replaced_by_id"].as_str()), (Some("RETIRED"), v2.body["job_id"].as_str()));
    api.put(&format!("/jobs/{v1}"), &json!({"cron": "0 11 * * MON"})).await.error(409, "JOB_NOT_UPDATABLE");
    let versions = api.get(&format!("/jobs/{v1}/versions")).await.body;
    let listed: Vec<u64> =
        versions["items"].as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!(listed, [1, 2]);
    // Paged like any list, from whichever version is asked about.
    let v2_id = v2.body["job_id"].as_str().unwrap();
    let (paged, pages) = api.list_all(&format!("/jobs/{v2_id}/versions"), 1).await;
    let listed: Vec<u64> = paged.iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!((listed, pages), (vec![1, 2], 2));
    api.put(&format!("/jobs/{}", v2.body["job_id"].as_str().unwrap()), &json!({"cron": "not cron"}))
        .await
        .error(422, "INVALID_CRON");
    api.put(&format!("/jobs/{}", v2.body["job_id"].as_str().unwrap()), &json!({"timezone": "Nowhere/Else"}))
        .await
        .error(422, "INVALID_CRON");
    let retired = api.post(&format!("/jobs/{}/cancel", v2.body["job_id"].as_str().unwrap()), &json!({})).await;
    assert_eq!(retired.body["status"], "RETIRED");
    let active = api.get("/jobs?trigger=CRON&status=ACTIVE").await.body;
    assert_eq!(active["items"], json!([]));
    api.get("/jobs?status=SLEEPING").await.error(400, "INVALID_REQUEST");
}

/// `PUT /endpoints/{name}` applies to future jobs only: jobs created before it, one-shot or
/// cron, keep delivering with the endpoint version they were created against.
/// `POST /executions/{id}/cancel?running=abort`: the delivery in flight is dropped (the
/// receiver sees its connection closed), the attempt and the execution are CANCELLED, and
/// nothing is retried though attempts were left.
async fn a_delivery_in_flight_is_aborted_when_asked(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "hang", "/hang/a", json!({"max_attempts": 3, "initial_delay_ms": 10})).await;
    http_endpoint(&api, &receiver, "e", "/ok/e", json!(null)).await;
    let input = json!({"user_id": "u", "amount": 1});

    let job = api.create("/jobs", &immediate("hang", "h1", input.clone())).await;
    let exec = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &exec, "RUNNING").await;
    eventually("the receiver holds the request", Duration::from_secs(10), || async {
        receiver.count_of("/hang/a") == 1
    })
    .await;
    let cancel = format!("/executions/{exec}/cancel");
    // Without the parameter a running execution is refused, saying how to abort it.
    let refused = api.post(&cancel, &json!({})).await.error(409, "EXECUTION_NOT_CANCELLABLE");
    assert!(refused.contains("?running=abort"), "{refused}");
    let bad = api.post(&format!("{cancel}?running=kill"), &json!({})).await.error(400, "INVALID_REQUEST");
    assert!(bad.contains("running"), "{bad}");

    // 200 once the worker has stopped it; 202 if it has not within the request's 5 s (a slow
    // box: SQLite's worker looks every second), and then it does.
    let asked = api.post(&format!("{cancel}?running=abort"), &json!({})).await;
    assert!([200, 202].contains(&asked.status.as_u16()), "{}", asked.text);
    assert!(asked.body["abort_requested_at"].is_string(), "{}", asked.text);
    let aborted = wait_for_status(&api, &exec, "CANCELLED").await;
    assert_eq!(aborted["output"]["error"]["type"], "ABORTED", "{aborted}");
    eventually("the receiver sees the connection closed", Duration::from_secs(10), || async {
        receiver.hung_up("a") == 1
    })
    .await;
    let attempts = api.get(&format!("/executions/{exec}/attempts")).await.body;
    let attempts = attempts["items"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        (attempts[0]["status"].as_str(), attempts[0]["error"]["type"].as_str()),
        (Some("CANCELLED"), Some("ABORTED"))
    );
    let after = api.get(&format!("/executions/{exec}")).await.body;
    assert_eq!((after["status"].as_str(), after["attempt_count"].as_i64()), (Some("CANCELLED"), Some(1)), "{after}");
    // Asked again: it is cancelled, and says so.
    assert_eq!(api.post(&format!("{cancel}?running=abort"), &json!({})).await.status, 200);

    // Not started yet: cancelled as without the parameter.
    let later = api
        .create("/jobs", &json!({"endpoint": "e", "trigger": "DELAYED", "idempotency_key": "d1", "delay_ms": 3_600_000, "input": input}))
        .await;
    let later_exec = later["execution"]["execution_id"].as_str().unwrap();
    let cancelled = api.post(&format!("/executions/{later_exec}/cancel?running=abort"), &json!({})).await;
    assert_eq!((cancelled.status.as_u16(), cancelled.body["status"].as_str()), (200, Some("CANCELLED")));
    // Finished: nothing to abort.
    let done = api.create("/jobs", &immediate("e", "e1", input)).await;
    let done_exec = done["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&api, done_exec, "SUCCESS").await;
    let message = api
        .post(&format!("/executions/{done_exec}/cancel?running=abort"), &json!({}))
        .await
        .error(409, "EXECUTION_NOT_CANCELLABLE");
    assert!(message.contains("SUCCESS"), "{message}");
    // Nothing more reached the receiver: the aborted execution was not retried.
    assert_eq!(receiver.count_of("/hang/a"), 1);
}

async fn endpoint_update_applies_to_future_jobs_only(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "notify", "/ok/before", json!(null)).await;
    let run_at = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let delayed = api
        .create("/jobs", &json!({"endpoint": "notify", "trigger": "DELAYED", "idempotency_key": "old-delayed", "run_at": run_at, "input": {"user_id": "d", "amount": 1}}))
        .await;
    let cron = api
        .create("/jobs", &json!({"endpoint": "notify", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"user_id": "c", "amount": 1}}))
        .await;
    assert_eq!(delayed["endpoint_version"], 1);

    let mut changed = api.get("/endpoints/notify").await.body;
    for field in ["version", "created_at", "updated_at", "circuit"] {
        changed.as_object_mut().unwrap().remove(field);
    }
    changed["spec"]["url"] = json!("{{config.base_url}}/ok/after");
    let updated = api.put("/endpoints/notify", &changed).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["version"], 2);

    let fresh = api.create("/jobs", &immediate("notify", "new-immediate", json!({"user_id": "n", "amount": 1}))).await;
    assert_eq!(fresh["endpoint_version"], 2);
    let fresh_execution = wait_for_status(&api, fresh["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(fresh_execution["endpoint_version"], 2);
    let old_execution = wait_for_status(&api, delayed["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    assert_eq!(old_execution["endpoint_version"], 1);
    let cron_id = cron["job_id"].as_str().unwrap();
    eventually("a tick of the older cron job", Duration::from_secs(30), || async {
        receiver.received().iter().any(|r| r.json()["user_id"] == "c")
    })
    .await;
    api.post(&format!("/jobs/{cron_id}/cancel"), &json!({})).await;

    for request in receiver.received() {
        let expected = if request.json()["user_id"] == "n" { "/ok/after" } else { "/ok/before" };
        assert_eq!(request.path, expected, "{} went to the wrong version", request.json()["user_id"]);
    }
    assert_eq!(api.get(&format!("/jobs/{cron_id}")).await.body["endpoint_version"], 1);
}

async fn cron_job_ticks_every_second_once_each(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let job = api.create("/jobs", &json!({"endpoint": "tick", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"user_id": "u", "amount": 1}})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("three delivered ticks", Duration::from_secs(30), || async {
        api.get(&format!("/jobs/{job_id}/executions?status=SUCCESS")).await.body["items"].as_array().unwrap().len() >= 3
    })
    .await;
    api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await;
    let all = api.get(&format!("/jobs/{job_id}/executions?limit=200")).await.body["items"].as_array().unwrap().clone();
    let mut ticks: Vec<String> = all.iter().map(|e| e["run_at"].as_str().unwrap().to_owned()).collect();
    let keys: std::collections::BTreeSet<&str> = all.iter().map(|e| e["idempotency_key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), all.len(), "each tick once");
    assert!(all.iter().all(|e| e["idempotency_key"].as_str().unwrap().starts_with(&format!("{job_id}_"))));
    ticks.sort();
    ticks.dedup();
    assert_eq!(ticks.len(), all.len(), "one execution per tick");
    let parsed: Vec<chrono::DateTime<chrono::Utc>> = ticks.iter().map(|t| t.parse().unwrap()).collect();
    assert!(parsed.windows(2).all(|w| w[1] - w[0] == chrono::Duration::seconds(1)), "consecutive seconds: {ticks:?}");
    let status = api.get(&format!("/jobs/{job_id}/status")).await.body;
    assert_eq!(status["status"], "RETIRED");
    assert!(status["cron"]["last_tick_at"].is_string());
}

/// A cron tick is materialized ahead of its time as a PENDING execution, delivered at its tick
/// and not before; cancelling the job cancels a tick still waiting, which is never delivered.
async fn cron_tick_is_made_ahead_and_fires_at_its_time(backend: Backend) {
    use chrono::{SubsecRound, Timelike, Utc};
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_CRON_LOOKAHEAD_SEC", "30")).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    // Hourly at one minute and second, about 10 s from now: that is the next tick.
    let tick = (Utc::now() + chrono::Duration::seconds(10)).trunc_subsecs(0);
    let cron = format!("{} {} * * * *", tick.second(), tick.minute());
    let job = |key: &str| json!({"endpoint": "tick", "trigger": "CRON", "cron": cron, "timezone": "UTC", "idempotency_key": key, "input": {"user_id": "u", "amount": 1}});
    let kept = api.create("/jobs", &job("kept")).await["job_id"].as_str().unwrap().to_owned();
    let cancelled = api.create("/jobs", &job("cancelled")).await["job_id"].as_str().unwrap().to_owned();

    let waiting = |job_id: String| {
        let api = api.clone();
        async move {
            let items = api.get(&format!("/jobs/{job_id}/executions")).await.body["items"].clone();
            items.as_array().unwrap().first().cloned()
        }
    };
    eventually("both ticks materialized ahead", Duration::from_secs(8), || async {
        waiting(kept.clone()).await.is_some() && waiting(cancelled.clone()).await.is_some()
    })
    .await;
    assert!(Utc::now() < tick, "the ticks were not made ahead of their time");
    let ahead = waiting(kept.clone()).await.unwrap();
    assert_eq!(ahead["status"], "PENDING");
    assert_eq!(ahead["run_at"].as_str().unwrap().parse::<chrono::DateTime<Utc>>().unwrap(), tick);
    // The job still reports the waiting tick as its next one.
    let shown = api.get(&format!("/jobs/{kept}")).await.body;
    assert_eq!(shown["next_run_at"].as_str().unwrap().parse::<chrono::DateTime<Utc>>().unwrap(), tick);
    assert_eq!(shown["last_tick_at"], Value::Null);

    api.post(&format!("/jobs/{cancelled}/cancel"), &json!({})).await;
    let dropped = waiting(cancelled.clone()).await.unwrap();
    assert_eq!(dropped["status"], "CANCELLED");

    wait_for_status(&api, ahead["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let received = receiver.received();
    assert_eq!(received.len(), 1, "only the kept job's tick is delivered");
    assert!(received[0].at >= tick, "delivered at {}, before its tick {tick}", received[0].at);
    let after = api.get(&format!("/jobs/{kept}")).await.body;
    assert_eq!(after["last_tick_at"].as_str().unwrap().parse::<chrono::DateTime<Utc>>().unwrap(), tick);
    assert_eq!(
        after["next_run_at"].as_str().unwrap().parse::<chrono::DateTime<Utc>>().unwrap(),
        tick + chrono::Duration::hours(1)
    );
    assert_eq!(
        api.get(&format!("/executions/{}", dropped["execution_id"].as_str().unwrap())).await.body["status"],
        "CANCELLED"
    );
}

async fn redis_stream_job_delivers(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let stream = format!("taskexec-e2e:{}", uuid::Uuid::new_v4().simple());
    api.create(
        "/configs",
        &json!({"name": "notify", "values": {"redis_url": "redis://127.0.0.1:6379", "stream": stream, "max": 100}}),
    )
    .await;
    api.create(
        "/endpoints",
        &json!({"name": "push", "type": "REDIS_STREAM", "config": "notify", "spec": {
            "redis_url": "{{config.redis_url}}", "stream": "{{config.stream}}", "max_len": "{{config.max}}",
            "fields_template": {"user_id": "{{input.user_id}}", "title": "{{input.title}}"}
        }}),
    )
    .await;
    let job = api.create("/jobs", &immediate("push", "r1", json!({"user_id": "u_9", "title": "Weekly"}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "SUCCESS").await;

    let mut con =
        redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1);
    let (id, fields) = &entries[0];
    assert_eq!(execution["output"], json!({"message_id": id, "stream": stream}));
    let fields: std::collections::HashMap<_, _> = fields.iter().cloned().collect();
    assert_eq!(fields["te_execution_id"], execution_id);
    assert_eq!((fields["user_id"].as_str(), fields["title"].as_str()), ("u_9", "Weekly"));
    let _: () = redis::cmd("DEL").arg(&stream).query_async(&mut con).await.unwrap();
}

/// Kafka through librdkafka's mock cluster, which the server process reaches over TCP like
/// any broker. One backend is enough: the store plays no part in how Kafka is spoken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_job_delivers_to_a_broker() {
    use rdkafka::message::{Headers, Message};
    let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start_with(&db, ServerOptions::new()).await;
    let api = server.client();
    api.create(
        "/endpoints",
        &json!({"name": "orders", "type": "KAFKA", "spec": {
            "bootstrap_servers": cluster.bootstrap_servers(), "topic": "orders", "key_template": "{{input.order_id}}",
            "value_template": {"order_id": "{{input.order_id}}", "amount": "{{input.amount}}"}, "acks": "all"
        }}),
    )
    .await;
    let job = api.create("/jobs", &immediate("orders", "o1", json!({"order_id": "order-1", "amount": 9.5}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "SUCCESS").await;

    let message = next_record(&kafka_consumer(&cluster.bootstrap_servers(), "orders"));
    assert_eq!(message.key(), Some(&b"order-1"[..]));
    assert_eq!(
        serde_json::from_slice::<Value>(message.payload().unwrap()).unwrap(),
        json!({"order_id": "order-1", "amount": 9.5})
    );
    let header = message.headers().unwrap().iter().find(|h| h.key == "te-execution-id").unwrap();
    assert_eq!(header.value, Some(execution_id.as_bytes()));
    assert_eq!(execution["output"], json!({"partition": message.partition(), "offset": message.offset()}));
}

async fn delayed_job_delivers_to_redis(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let stream = format!("taskexec-e2e:{}", uuid::Uuid::new_v4().simple());
    api.create(
        "/endpoints",
        &json!({"name": "later", "type": "REDIS_STREAM", "spec": {
            "redis_url": "redis://127.0.0.1:6379", "stream": stream, "fields_template": {"n": "{{input.n}}"}
        }}),
    )
    .await;
    let run_at = chrono::Utc::now() + chrono::Duration::milliseconds(800);
    let job = api.create("/jobs", &json!({"endpoint": "later", "trigger": "DELAYED", "idempotency_key": "r", "run_at": run_at, "input": {"n": 5}})).await;
    let execution = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let mut con =
        redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(execution["output"]["message_id"], entries[0].0.as_str());
    // The stream id is the time Redis received the entry: not before run_at.
    let received_ms: i64 = entries[0].0.split('-').next().unwrap().parse().unwrap();
    assert!(received_ms >= run_at.timestamp_millis(), "delivered before run_at");
    let _: () = redis::cmd("DEL").arg(&stream).query_async(&mut con).await.unwrap();
}

/// A cron job through the Kafka mock cluster: every tick is one message, keyed per tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_job_delivers_to_kafka() {
    use rdkafka::message::{Headers, Message};
    let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
    cluster.create_topic("ticks", 1, 1).unwrap();
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    api.create("/endpoints", &json!({"name": "ticks", "type": "KAFKA", "spec": {
        "bootstrap_servers": cluster.bootstrap_servers(), "topic": "ticks", "value_template": {"job": "{{input.name}}"}
    }})).await;
    let job = api.create("/jobs", &json!({"endpoint": "ticks", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"name": "every-second"}})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let consumer = kafka_consumer(&cluster.bootstrap_servers(), "ticks");
    let mut execution_ids = std::collections::BTreeSet::new();
    while execution_ids.len() < 3 {
        let m = next_record(&consumer);
        assert_eq!(serde_json::from_slice::<Value>(m.payload().unwrap()).unwrap(), json!({"job": "every-second"}));
        let id = m.headers().unwrap().iter().find(|h| h.key == "te-execution-id").unwrap().value.unwrap().to_vec();
        execution_ids.insert(String::from_utf8(id).unwrap());
    }
    api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await;
    // Each consumed message is one of the job's executions, each tick delivered once.
    let (executions, _) = api.list_all(&format!("/jobs/{job_id}/executions"), 200).await;
    let known: std::collections::BTreeSet<String> =
        executions.iter().map(|e| e["execution_id"].as_str().unwrap().to_owned()).collect();
    assert!(execution_ids.is_subset(&known), "{execution_ids:?} not all in {known:?}");
}
