//! Secrets: never returned, never logged, encrypted at rest, rotated by the CLI.

use std::process::Stdio;

use serde_json::json;

use crate::both_backends;
use crate::support::server::{base_env, command, SECRET_KEY};
use crate::support::{Backend, Server, ServerOptions, TestDb};

both_backends!(
    secret_values_never_leave_the_server,
    secrets_are_encrypted_at_rest,
    key_rotation_reencrypts_every_secret
);

const VALUE: &str = "sk-live-TOPSECRET-4f1c9a";
const ROTATED: &str = "sk-live-ROTATED-77b2e0";

async fn secret_values_never_leave_the_server(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let mut bodies = Vec::new();

    let created = api.post("/secrets", &json!({"name": "email_api_key", "value": VALUE})).await;
    assert_eq!(created.status, 201);
    assert_eq!(
        created.body.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["allowed_hosts", "created_at", "name", "updated_at"]
    );
    bodies.push(created.text);
    // The same value again: an idempotent repeat. Another value: a conflict that does not
    // echo either value.
    let repeat = api.post("/secrets", &json!({"name": "email_api_key", "value": VALUE})).await;
    assert_eq!(repeat.status, 200);
    bodies.push(repeat.text);
    let conflict = api.post("/secrets", &json!({"name": "email_api_key", "value": ROTATED})).await;
    conflict.error(409, "CONFLICT");
    bodies.push(conflict.text);
    bodies.push(api.get("/secrets/email_api_key").await.text);
    bodies.push(api.get("/secrets").await.text);
    // A wrongly typed value is refused without being quoted back.
    for bad in [json!(123456789), json!([VALUE]), json!({"v": VALUE}), json!("")] {
        let r = api.post("/secrets", &json!({"name": "other_key", "value": bad})).await;
        let msg = r.error(400, "INVALID_REQUEST");
        assert!(msg.starts_with("`value`") && !msg.contains("123456789"), "{msg}");
        bodies.push(r.text);
    }
    let rotated = api.put("/secrets/email_api_key", &json!({"value": ROTATED})).await;
    assert_eq!(rotated.status, 200);
    assert!(rotated.body.get("value").is_none());
    bodies.push(rotated.text);
    // After the rotation, the new value is the one a repeat create matches.
    assert_eq!(api.post("/secrets", &json!({"name": "email_api_key", "value": ROTATED})).await.status, 200);
    api.put("/secrets/missing", &json!({"value": "x"})).await.error(404, "SECRET_NOT_FOUND");
    api.get("/secrets/missing").await.error(404, "SECRET_NOT_FOUND");

    // An endpoint whose template refuses to parse must not quote the secret either.
    let r = api
        .post(
            "/endpoints",
            &json!({"name": "e", "type": "HTTP", "spec": {"url": "https://x.example", "method": "POST",
            "headers": {"Authorization": "Bearer {{secret.email_api_key}}"}}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    bodies.push(r.text);

    let logs = server.stop();
    assert!(logs.contains("Request handled."), "the run logged requests at debug level");
    for text in bodies.iter().chain(std::iter::once(&logs)) {
        assert!(!text.contains(VALUE) && !text.contains(ROTATED), "a secret value leaked into: {text}");
    }
}

async fn secrets_are_encrypted_at_rest(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    api.create("/secrets", &json!({"name": "a_key", "value": VALUE})).await;
    api.create("/secrets", &json!({"name": "b_key", "value": VALUE})).await;

    let a = db.secret_ciphertext("a_key").await;
    let b = db.secret_ciphertext("b_key").await;
    assert!(!a.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()), "plaintext stored");
    // Format byte, 4-byte key id, 12-byte nonce, ciphertext, 16-byte tag.
    assert_eq!(a.len(), 1 + 4 + 12 + VALUE.len() + 16);
    assert_ne!(a[5..17], b[5..17], "each write gets a fresh nonce");

    // A rotation through the API writes a new envelope.
    api.put("/secrets/a_key", &json!({"value": VALUE})).await;
    assert_ne!(db.secret_ciphertext("a_key").await, a);
}

async fn key_rotation_reencrypts_every_secret(backend: Backend) {
    let db = TestDb::new(backend).await;
    let old_key = SECRET_KEY;
    let new_key = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=";
    let server = Server::start_with(&db, ServerOptions::new().env("TE_SECRET_ENCRYPTION_KEY", old_key)).await;
    for i in 0..3 {
        server.client().create("/secrets", &json!({"name": format!("key_{i}"), "value": format!("{VALUE}-{i}")})).await;
    }
    server.stop();
    let before = db.secret_ciphertext("key_0").await;

    // A server holding only the new key cannot read the old envelopes...
    let server = Server::start_with(&db, ServerOptions::new().env("TE_SECRET_ENCRYPTION_KEY", new_key)).await;
    server
        .client()
        .post("/secrets", &json!({"name": "key_0", "value": format!("{VALUE}-0")}))
        .await
        .error(409, "CONFLICT");
    server.stop();

    // ...until `secrets rotate` re-encrypts them, reading with the previous key.
    let env = base_env(
        &db,
        &ServerOptions::new()
            .env("TE_SECRET_ENCRYPTION_KEY", new_key)
            .env("TE_SECRET_ENCRYPTION_KEY_PREVIOUS", old_key),
    );
    let out = command(&["secrets", "rotate"], &env, db.dir.path()).stderr(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("Re-encrypted 3 secret(s)"), "{stdout}");
    assert_ne!(db.secret_ciphertext("key_0").await[1..5], before[1..5], "the key id changed");

    let server = Server::start_with(&db, ServerOptions::new().env("TE_SECRET_ENCRYPTION_KEY", new_key)).await;
    for i in 0..3 {
        let body = json!({"name": format!("key_{i}"), "value": format!("{VALUE}-{i}")});
        assert_eq!(server.client().post("/secrets", &body).await.status, 200, "key_{i} opens under the new key");
    }
    // Running it again finds nothing to do.
    let out = command(&["secrets", "rotate"], &env, db.dir.path()).stderr(Stdio::null()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Re-encrypted 0 secret(s)"));
}
