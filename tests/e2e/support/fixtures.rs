//! What most tests set up: an HTTP endpoint with a config, a secret and a payload spec, a job
//! body, and waiting for an execution's status.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Client, Receiver};

/// The secret every [`http_endpoint`] sends as its bearer token.
pub const SECRET: &str = "sk-live-engine-7f3a";

/// A config, a secret, a payload spec, and an HTTP endpoint `name` posting to `path` on the
/// receiver with `retry_policy`.
pub async fn http_endpoint(api: &Client, receiver: &Receiver, name: &str, path: &str, retry_policy: Value) {
    if api.get("/configs/receiver").await.status == 404 {
        api.create(
            "/configs",
            &json!({"name": "receiver", "values": {"base_url": receiver.base_url, "sender": "noreply@example.com"}}),
        )
        .await;
        api.create("/secrets", &json!({"name": "api_key", "value": SECRET})).await;
        api.create("/payload-specs", &json!({"name": "user-input", "schema": {
            "type": "object", "properties": {"user_id": {"type": "string"}, "amount": {"type": "number"}}, "required": ["user_id"]
        }})).await;
    }
    api.create(
        "/endpoints",
        &json!({
            "name": name, "type": "HTTP", "payload_spec": "user-input", "config": "receiver",
            "spec": {
                "url": format!("{{{{config.base_url}}}}{path}"),
                "method": "POST",
                "headers": {"Authorization": "Bearer {{secret.api_key}}"},
                "body_template": {"user_id": "{{input.user_id}}", "amount": "{{input.amount}}", "sender": "{{config.sender}}"},
                "timeout_ms": 10000
            },
            "retry_policy": retry_policy,
        }),
    )
    .await;
}

/// Wait (30 s at most) until execution `execution_id` is `status`; the execution.
pub async fn wait_for_status(api: &Client, execution_id: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let execution = api.get(&format!("/executions/{execution_id}")).await.body;
        if execution["status"] == status {
            return execution;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "execution {execution_id} is {}, not {status}: {execution}",
            execution["status"]
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The body of an IMMEDIATE job for `endpoint` with idempotency key `key`.
pub fn immediate(endpoint: &str, key: &str, input: Value) -> Value {
    json!({"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": input})
}

/// A consumer of `topic` from its first record, in a group of its own.
pub fn kafka_consumer(bootstrap_servers: &str, topic: &str) -> rdkafka::consumer::BaseConsumer {
    use rdkafka::consumer::Consumer;
    let consumer: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap_servers)
        .set("group.id", format!("e2e-{topic}"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    consumer
}

/// The next record `consumer` reads, waiting up to 30 seconds for it.
pub fn next_record(consumer: &rdkafka::consumer::BaseConsumer) -> rdkafka::message::OwnedMessage {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        assert!(std::time::Instant::now() < deadline, "nothing consumed");
        if let Some(m) = consumer.poll(Duration::from_millis(100)) {
            return m.unwrap().detach();
        }
    }
}
