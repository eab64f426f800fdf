//! Concurrency keys (`concurrency` on an endpoint): at most `max_in_flight` executions of one
//! key at the receiver across two worker processes, and under `ordering: fifo` one key's
//! executions delivered one at a time in the order their jobs fire, a retrying one holding the
//! ones behind it.

use std::time::Duration;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::wait_for_status;
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    a_fifo_key_is_delivered_in_order_one_at_a_time_across_two_workers,
    a_key_never_has_more_than_max_in_flight_at_the_receiver,
    concurrency_and_its_keys_are_checked,
);

/// An endpoint posting `{key, seq, fail_once}` of the input to the receiver's `/keyed/{ms}`.
async fn keyed_endpoint(api: &Client, receiver: &Receiver, name: &str, ms: u64, concurrency: Value) {
    api.create(
        "/endpoints",
        &json!({"name": name, "type": "HTTP", "concurrency": concurrency,
                "retry_policy": {"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 300},
                "spec": {"url": format!("{}/keyed/{ms}", receiver.base_url), "method": "POST",
                         "body_template": {"key": "{{input.customer}}", "seq": "{{input.seq}}",
                                           "fail_once": "{{input.fail_once}}"}}}),
    )
    .await;
}

/// The service, and a second process with a worker of its own.
async fn two_workers(db: &TestDb) -> (Server, Server) {
    let server = Server::start(db).await;
    let second = Server::start_with(db, ServerOptions::new().roles("worker", "Worker running.")).await;
    (server, second)
}

async fn a_fifo_key_is_delivered_in_order_one_at_a_time_across_two_workers(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (server, _second) = two_workers(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    keyed_endpoint(&api, &receiver, "ordered", 40, json!({"key": "{{input.customer}}", "ordering": "fifo"})).await;
    // Three customers' jobs interleaved, each created after the one before (their fire order);
    // the first of `c0` fails once, and its retry holds the rest of `c0` back.
    let mut last = String::new();
    for seq in 0..5 {
        for customer in ["c0", "c1", "c2"] {
            let input = json!({"customer": customer, "seq": seq, "fail_once": customer == "c0" && seq == 0});
            let job = json!({"endpoint": "ordered", "trigger": "IMMEDIATE",
                             "idempotency_key": format!("{customer}-{seq}"), "input": input});
            let created = api.create("/jobs", &job).await;
            last = created["execution"]["execution_id"].as_str().unwrap().to_owned();
        }
    }
    let execution = api.get(&format!("/executions/{last}")).await.body;
    assert_eq!(execution["concurrency_key"], "c2", "{execution}");
    wait_for_status(&api, &last, "SUCCESS").await;
    eventually("every key's five delivered", Duration::from_secs(30), || async {
        ["c0", "c1", "c2"].iter().all(|c| receiver.keyed_order(c).len() == 5)
    })
    .await;
    for customer in ["c0", "c1", "c2"] {
        assert_eq!(receiver.keyed_order(customer), [0, 1, 2, 3, 4], "{customer} in the order its jobs fired");
        assert_eq!(receiver.keyed_most_at_once(customer), 1, "{customer} one at a time");
    }
    // c0's first was tried twice; the one behind it waited for its retry, not beside it.
    assert_eq!(receiver.count_of("/keyed/"), 16);
}

async fn a_key_never_has_more_than_max_in_flight_at_the_receiver(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (server, _second) = two_workers(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    keyed_endpoint(&api, &receiver, "bounded", 300, json!({"key": "{{input.customer}}", "max_in_flight": 2})).await;
    let jobs: Vec<Value> = (0..12)
        .map(|i| {
            let customer = if i % 2 == 0 { "a" } else { "b" };
            json!({"endpoint": "bounded", "trigger": "IMMEDIATE", "idempotency_key": format!("j{i}"),
                   "input": {"customer": customer, "seq": i, "fail_once": false}})
        })
        .collect();
    let made = api.post("/jobs/batch", &json!({ "jobs": jobs })).await.body;
    let ids: Vec<String> = made["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"]["execution"]["execution_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 12, "{made}");
    for id in &ids {
        wait_for_status(&api, id, "SUCCESS").await;
    }
    for customer in ["a", "b"] {
        assert_eq!(receiver.keyed_order(customer).len(), 6);
        // Two at a time: the bound, and no less (two workers with slots to spare).
        assert_eq!(receiver.keyed_most_at_once(customer), 2, "{customer}");
    }
}

async fn concurrency_and_its_keys_are_checked(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let endpoint = |concurrency: Value| {
        json!({"name": "checked", "type": "HTTP", "concurrency": concurrency,
               "spec": {"url": format!("{}/ok/x", receiver.base_url), "method": "POST"}})
    };
    for (concurrency, field) in [
        (json!({"key": "{{input.a}}", "ordering": "fifo", "max_in_flight": 3}), "concurrency.max_in_flight"),
        (json!({"key": "{{input.a}}"}), "concurrency.max_in_flight"),
        (json!({"key": "{{input.a}}", "max_in_flight": 0}), "concurrency.max_in_flight"),
        (json!({"key": "{{secret.token}}", "max_in_flight": 1}), "concurrency.key"),
        (json!({"key": "all", "max_in_flight": 1}), "concurrency.key"),
    ] {
        let message = api.post("/endpoints", &endpoint(concurrency.clone())).await.error(400, "INVALID_REQUEST");
        assert!(message.starts_with(&format!("`{field}`")), "{concurrency}: {message}");
    }
    let message = api
        .post("/endpoints", &endpoint(json!({"key": "{{input.a}}", "ordering": "lifo"})))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("ordering"), "{message}");
    let made = api.create("/endpoints", &endpoint(json!({"key": "org-{{input.org.id}}", "ordering": "fifo"}))).await;
    assert_eq!(made["concurrency"], json!({"key": "org-{{input.org.id}}", "max_in_flight": 1, "ordering": "fifo"}));
    // A job whose input cannot make the key is refused, naming the field.
    let job =
        |input: Value| json!({"endpoint": "checked", "trigger": "IMMEDIATE", "idempotency_key": "k1", "input": input});
    let message = api.post("/jobs", &job(json!({"org": {}}))).await.error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`input.org.id`"), "{message}");
    let message = api.post("/jobs", &job(json!({"org": {"id": [1]}}))).await.error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`input.org.id`"), "{message}");
    let created = api.create("/jobs", &job(json!({"org": {"id": 7}}))).await;
    let id = created["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&api, id, "SUCCESS").await;
    assert_eq!(api.get(&format!("/executions/{id}")).await.body["concurrency_key"], "org-7");
}
