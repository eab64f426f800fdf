//! Recovering from a receiver's bad day: the dead-letter view, retry and replay.

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{Backend, Client, Receiver, Server, TestDb};

both_backends!(failed_executions_are_listed_retried_and_replayed);

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
