//! Signed deliveries (Standard Webhooks): what an HTTP endpoint with `signing` sends is verified
//! by the specification's reference library from PyPI (`verify_webhook.py`), with one key and
//! with two during a rotation; the message id holds across retries; a key that is not a
//! reference, or not a Standard Webhooks key, is refused naming the field.

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::wait_for_status;
use crate::support::receiver::Received;
use crate::support::{Backend, Client, Receiver, Server, TestDb};

both_backends!(signed_deliveries_verify_with_the_reference_library);

/// The Python that has the reference library: scripts/test makes it.
fn verifier_python() -> String {
    std::env::var("TE_TEST_WEBHOOKS_PYTHON").unwrap_or_else(|_| {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/standardwebhooks-venv/bin/python");
        assert!(
            std::path::Path::new(venv).exists(),
            "the Standard Webhooks reference library is not installed: run scripts/test, or \
             scripts/python-venv target/standardwebhooks-venv standardwebhooks==1.1.0"
        );
        venv.to_owned()
    })
}

/// Whether `request` verifies under `key` by the reference library; its reason when not.
fn verify(request: &Received, key: &str) -> Result<(), String> {
    let headers: serde_json::Map<String, Value> =
        request.headers.iter().map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap()))).collect();
    let body = String::from_utf8(request.body.to_vec()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/verify_webhook.py");
    let mut child = Command::new(verifier_python())
        .args([script, key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the verifier starts");
    let input = json!({"headers": headers, "body": body}).to_string();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    match out.status.code() {
        Some(0) => Ok(()),
        Some(1) => Err(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
        _ => panic!("the verifier failed: {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// A new Standard Webhooks key: `whsec_` and the base64 of 32 random bytes.
fn new_key() -> String {
    let bytes: [u8; 32] = std::array::from_fn(|_| rand::random());
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

async fn signed_endpoint(api: &Client, receiver: &Receiver, name: &str, path: &str, secret: Value) {
    let endpoint = json!({"name": name, "type": "HTTP", "retry_policy": {"max_attempts": 3, "initial_delay_ms": 100},
        "spec": {"url": format!("{}{path}", receiver.base_url), "method": "POST",
                 "body_template": {"order": "{{input.order}}", "note": "naïve ✓"},
                 "signing": {"secret": secret}}});
    api.create("/endpoints", &endpoint).await;
}

async fn deliver(api: &Client, endpoint: &str, key: &str) -> Value {
    let job = json!({"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": key, "input": {"order": key}});
    let job = api.create("/jobs", &job).await;
    wait_for_status(api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await
}

async fn signed_deliveries_verify_with_the_reference_library(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let (new, old) = (new_key(), new_key());
    api.create("/secrets", &json!({"name": "hook_new", "value": new})).await;
    api.create("/secrets", &json!({"name": "hook_old", "value": old})).await;
    api.create("/secrets", &json!({"name": "not_a_key", "value": "hunter2-not-base64"})).await;

    // One key: every header there, the id the execution's on every attempt, verified by the
    // reference library under that key and refused under another.
    signed_endpoint(&api, &receiver, "signed", "/flaky/signed/1", json!("{{secret.hook_new}}")).await;
    let execution = deliver(&api, "signed", "o-1").await;
    let sent: Vec<Received> = receiver.received().into_iter().filter(|r| r.path.starts_with("/flaky/signed")).collect();
    assert_eq!(sent.len(), 2, "a 503, then the retry");
    for request in &sent {
        assert_eq!(request.header("webhook-id").as_deref(), execution["execution_id"].as_str(), "one id per message");
        let timestamp: i64 = request.header("webhook-timestamp").unwrap().parse().unwrap();
        assert!((chrono::Utc::now().timestamp() - timestamp).abs() < 60, "seconds since the epoch: {timestamp}");
        assert_eq!(verify(request, &new), Ok(()));
        assert_eq!(verify(request, &old).unwrap_err(), "No matching signature found");
    }
    assert_eq!(sent[1].json()["order"], "o-1");
    // The reference library checks the body: one byte changed fails.
    let mut tampered = sent[1].clone();
    tampered.body = String::from_utf8(tampered.body.to_vec()).unwrap().replace("o-1", "o-2").into_bytes().into();
    assert!(verify(&tampered, &new).is_err());

    // Rotation: two keys, each signs; a receiver holding either accepts the delivery.
    signed_endpoint(&api, &receiver, "rotating", "/ok/rotating", json!(["{{secret.hook_new}}", "{{secret.hook_old}}"]))
        .await;
    deliver(&api, "rotating", "o-2").await;
    let request = receiver.received().into_iter().find(|r| r.path == "/ok/rotating").unwrap();
    assert_eq!(request.header("webhook-signature").unwrap().split(' ').count(), 2);
    assert_eq!((verify(&request, &new), verify(&request, &old)), (Ok(()), Ok(())));
    assert!(verify(&request, &new_key()).is_err());

    // A secret that is not a Standard Webhooks key fails the execution unsent, naming the field
    // and never the value.
    signed_endpoint(&api, &receiver, "unkeyed", "/ok/unkeyed", json!("{{secret.not_a_key}}")).await;
    let job = json!({"endpoint": "unkeyed", "trigger": "IMMEDIATE", "idempotency_key": "u", "input": {"order": "u"}});
    let job = api.create("/jobs", &job).await;
    let failed = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    let message = failed["output"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("signing.secret[0]") && !message.contains("hunter2"), "{failed}");
    assert_eq!(receiver.count_of("/ok/unkeyed"), 0);

    // Registration: only secret references, one to four.
    for (secret, why) in [
        (json!(new), "reference"),
        (json!("{{config.key}}"), "reference"),
        (json!([]), "1 to 4"),
        (json!(["{{secret.a}}", "{{secret.b}}", "{{secret.c}}", "{{secret.d}}", "{{secret.e}}"]), "1 to 4"),
    ] {
        let endpoint = json!({"name": "refused", "type": "HTTP",
            "spec": {"url": "http://127.0.0.1:9/x", "method": "POST", "signing": {"secret": secret}}});
        let message = api.post("/endpoints", &endpoint).await.error(400, "INVALID_REQUEST");
        assert!(message.contains("spec.signing.secret") && message.contains(why), "{secret}: {message}");
        assert!(!message.contains(&new), "a refused key is not quoted back");
    }
}
