//! Success callbacks (`on_success`): a job's successful execution is told to another endpoint,
//! with what the receiver answered and any secret it echoed redacted. (Failure callbacks are in
//! `e2e_recovery`.)

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status, SECRET};
use crate::support::{eventually, Backend, Receiver, Server, TestDb};

both_backends!(a_success_is_told_to_the_on_success_endpoint_once_with_the_answer);

async fn a_success_is_told_to_the_on_success_endpoint_once_with_the_answer(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    // A receiver that quotes the request back: the Authorization header carries the secret.
    http_endpoint(&api, &receiver, "echoing", "/echo/200", json!(null)).await;
    api.create(
        "/endpoints",
        &json!({"name": "told", "type": "HTTP", "retry_policy": {"max_attempts": 1}, "spec": {
            "url": format!("{}/ok/told", receiver.base_url), "method": "POST",
            "body_template": {"event": "{{input.event}}", "execution_id": "{{input.execution_id}}",
                              "response": "{{input.response}}"}}}),
    )
    .await;
    let input = json!({"user_id": "u", "amount": 1});

    // A success without a callback tells nobody; one with tells `told`, once.
    let plain = api.create("/jobs", &immediate("echoing", "s0", input.clone())).await;
    wait_for_status(&api, plain["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let job = json!({"endpoint": "echoing", "trigger": "IMMEDIATE", "idempotency_key": "s1", "input": input, "on_success": "told"});
    let created = api.create("/jobs", &job).await;
    assert_eq!(created["on_success"], "told");
    let execution_id = created["execution"]["execution_id"].as_str().unwrap().to_owned();
    wait_for_status(&api, &execution_id, "SUCCESS").await;
    eventually("the success told", Duration::from_secs(20), || async { receiver.count_of("/ok/told") == 1 }).await;
    let told = receiver.received().into_iter().find(|r| r.path == "/ok/told").unwrap().json();
    assert_eq!(
        (told["event"].as_str(), told["execution_id"].as_str()),
        (Some("execution.succeeded"), Some(execution_id.as_str()))
    );
    let response = &told["response"];
    assert_eq!(response["status_code"], 200, "{told}");
    assert_eq!(response["headers"]["content-type"], "text/plain; charset=utf-8", "the receiver's headers: {told}");
    let body: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["url"], "/echo/200", "the receiver's body: {told}");
    // The receiver quoted the secret back; neither the callback nor its job holds it.
    assert!(!told.to_string().contains(SECRET), "{told}");
    let callbacks = api.get("/jobs?endpoint=told").await.body;
    let items = callbacks["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one callback, for the job that asked: {callbacks}");
    assert_eq!(items[0]["idempotency_key"], format!("on_success:{execution_id}"));
    assert!(!callbacks.to_string().contains(SECRET));
    // Its callback job's own success is told to nobody: it has no on_success.
    assert!(items[0].get("on_success").is_none(), "{callbacks}");

    // A cron job's ticks each tell theirs.
    let cron = json!({"endpoint": "echoing", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC",
                      "input": {"user_id": "c", "amount": 2}, "on_success": "told"});
    let cron = api.create("/jobs", &cron).await;
    eventually("a tick's success told", Duration::from_secs(20), || async { receiver.count_of("/ok/told") >= 2 }).await;
    api.post(&format!("/jobs/{}/cancel", cron["job_id"].as_str().unwrap()), &json!({})).await;
    let tick = receiver.received().into_iter().filter(|r| r.path == "/ok/told").nth(1).unwrap().json();
    let ticked = api.get(&format!("/executions/{}", tick["execution_id"].as_str().unwrap())).await.body;
    assert_eq!(ticked["job_id"], cron["job_id"], "{tick}");

    // The repeat must match; the field is checked like on_failure.
    let mut other = job.clone();
    other.as_object_mut().unwrap().remove("on_success");
    let message = api.post("/jobs", &other).await.error(409, "CONFLICT");
    assert!(message.contains("on_success"), "{message}");
    other["idempotency_key"] = json!("s2");
    other["on_success"] = json!("echoing");
    let message = api.post("/jobs", &other).await.error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`on_success`"), "{message}");
    other["on_success"] = json!("nowhere");
    let message = api.post("/jobs", &other).await.error(422, "INVALID_ENDPOINT_REF");
    assert!(message.contains("`on_success`") && message.contains("nowhere"), "{message}");
}
