//! WebAssembly plugins: built from `plugins/` for wasm32-wasip2, installed with the real CLI,
//! and run by the real binary. The registry runs on both backends; the sandbox tests run on
//! SQLite, since the plugin runtime does not involve the store beyond reading the plugin.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, kafka_consumer, next_record, wait_for_status};
use crate::support::server::{command, API_KEY};
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    registry_installs_checks_and_refuses,
    versions_are_pinned_rolled_back_and_removed,
    instances_are_reused_only_within_one_endpoint_version,
    a_classifier_overrules_the_transport_on_the_answers_body,
    a_schedule_plugin_fires_a_cron_job_on_its_own_calendar
);

/// Build every plugin once per test run; the path of `name`'s component.
pub(crate) fn component(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = root.join("plugins/target");
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(root.join("plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "building the plugins failed (is the wasm32-wasip2 target installed? scripts/test adds it)"
        );
        target.join("wasm32-wasip2/release")
    });
    dir.join(format!("{}.wasm", name.replace('-', "_")))
}

/// Run `taskexec plugin ARGS` against `server`; (success, stdout + stderr).
fn cli(server: &Server, db: &TestDb, args: &[&str]) -> (bool, String) {
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    let out = command(&all, &env, db.dir.path()).stdin(Stdio::null()).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Install `file`'s component from plugins/ as `name` with the real CLI, allowed to reach
/// `allow_host`; the CLI's output.
fn install_allowing(server: &Server, db: &TestDb, file: &str, name: &str, allow_host: &str) -> String {
    let (ok, out) =
        cli(server, db, &["install", component(file).to_str().unwrap(), "--name", name, "--allow-host", allow_host]);
    assert!(ok, "{out}");
    out
}

async fn upload(api: &Client, query: &str, bytes: Vec<u8>) -> crate::support::server::Response {
    api.send_raw(reqwest::Method::POST, &format!("/plugins?{query}"), Some("application/wasm"), bytes).await
}

async fn registry_installs_checks_and_refuses(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_PLUGIN_MAX_BYTES", "2000000")).await;
    let api = server.client();
    let webhook = component("webhook-signed");
    let webhook_path = webhook.to_str().unwrap();

    let (ok, out) =
        cli(&server, &db, &["install", webhook_path, "--name", "webhook", "--allow-host", "http://127.0.0.1:*"]);
    assert!(ok, "{out}");
    assert!(out.contains("Installed webhook version 1 (transport-plugin"), "{out}");
    let (ok, out) =
        cli(&server, &db, &["install", webhook_path, "--name", "webhook", "--allow-host", "http://127.0.0.1:*"]);
    assert!(ok && out.contains("Already installed"), "{out}");
    let (ok, out) = cli(&server, &db, &["list"]);
    assert!(ok && out.contains("webhook") && out.contains("transport-plugin"), "{out}");
    let (ok, out) = cli(&server, &db, &["show", "webhook"]);
    assert!(ok, "{out}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    let sha: String = Sha256::digest(std::fs::read(&webhook).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!((shown["sha256"].as_str(), shown["versions"].as_array().unwrap().len()), (Some(sha.as_str()), 1));
    assert_eq!(shown["grants"], json!(["http://127.0.0.1:*"]));

    // Offline check prints the exports and imports.
    let (ok, out) = cli(&server, &db, &["check", webhook_path, "--world", "transport-plugin"]);
    assert!(
        ok && out.contains("taskexec:plugin/transport@0.1.0") && out.contains("taskexec:plugin/http-client"),
        "{out}"
    );
    let (ok, out) =
        cli(&server, &db, &["check", component("dollar-renderer").to_str().unwrap(), "--world", "transport-plugin"]);
    assert!(!ok && out.contains("implements renderer-plugin, not the claimed transport-plugin"), "{out}");

    // Uploads that are not plugins say what to fix.
    let msg = upload(&api, "name=junk", b"definitely not wasm".to_vec()).await.error(422, "INVALID_PLUGIN");
    assert!(msg.contains("not WebAssembly"), "{msg}");
    let core_module = vec![0, b'a', b's', b'm', 1, 0, 0, 0];
    let msg = upload(&api, "name=core", core_module).await.error(422, "INVALID_PLUGIN");
    assert!(msg.contains("core WebAssembly module"), "{msg}");
    let renderer = std::fs::read(component("dollar-renderer")).unwrap();
    let msg =
        upload(&api, "name=wrong-world&world=transport-plugin", renderer.clone()).await.error(422, "INVALID_PLUGIN");
    assert!(msg.contains("not the claimed transport-plugin"), "{msg}");
    upload(&api, "name=big", vec![0; 2_100_000]).await.error(413, "PAYLOAD_TOO_LARGE");
    let msg = upload(&api, "name=grants&allow_host=ftp://x", renderer.clone()).await.error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`allow_host`"), "{msg}");
    let msg = upload(&api, "name=mem&memory_mb=100000", renderer.clone()).await.error(400, "INVALID_REQUEST");
    assert!(msg.starts_with("`memory_mb`"), "{msg}");
    upload(&api, "name=Bad_Name", renderer.clone()).await.error(400, "INVALID_REQUEST");
    api.get("/plugins/junk").await.error(404, "PLUGIN_NOT_FOUND");

    // A PLUGIN endpoint is validated by its plugin; a plugin in use cannot be removed.
    let msg = api
        .post(
            "/endpoints",
            &json!({"name": "hook", "type": "PLUGIN", "plugin": "webhook", "spec": {"url": "http://127.0.0.1:1/x"}}),
        )
        .await
        .error(422, "INVALID_SPEC");
    assert!(msg.contains("missing field `secret`"), "{msg}");
    api.post("/endpoints", &json!({"name": "hook", "type": "PLUGIN", "plugin": "nope", "spec": {}}))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    api.post("/endpoints", &json!({"name": "hook", "type": "PLUGIN", "spec": {}})).await.error(400, "INVALID_REQUEST");
    api.create(
        "/endpoints",
        &json!({"name": "hook", "type": "PLUGIN", "plugin": "webhook",
        "spec": {"url": "http://127.0.0.1:1/x", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}),
    )
    .await;
    let (ok, out) = cli(&server, &db, &["remove", "webhook"]);
    assert!(!ok && out.contains("409") && out.contains("hook"), "{out}");
    assert_eq!(api.delete("/endpoints/hook").await.status, 204);
    let (ok, out) = cli(&server, &db, &["remove", "webhook"]);
    assert!(ok, "{out}");
    api.get("/plugins/webhook").await.error(404, "PLUGIN_NOT_FOUND");
}

/// HMAC-SHA256 written out from its definition (RFC 2104) over sha2: an implementation
/// independent of the plugin's, to check its signatures.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let inner: Vec<u8> = block.iter().map(|b| b ^ 0x36).chain(message.iter().copied()).collect();
    let inner_hash = Sha256::digest(&inner);
    let outer: Vec<u8> = block.iter().map(|b| b ^ 0x5c).chain(inner_hash.iter().copied()).collect();
    Sha256::digest(&outer).into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_webhook_reaches_the_receiver_and_verifies() {
    use base64::Engine;
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    install_allowing(&server, &db, "webhook-signed", "webhook", "http://127.0.0.1:*");
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    api.create("/secrets", &json!({"name": "hook_secret", "value": secret})).await;
    api.create(
        "/endpoints",
        &json!({"name": "signed", "type": "PLUGIN", "plugin": "webhook", "spec": {
            "url": format!("{}/ok/signed", receiver.base_url), "secret": "{{secret.hook_secret}}",
            "body_template": {"user": "{{input.user}}", "amount": "{{input.amount}}"}, "timeout_ms": 5000
        }}),
    )
    .await;
    let job = api.create("/jobs", &immediate("signed", "s1", json!({"user": "u_1", "amount": 3.5}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let execution = wait_for_status(&api, &execution_id, "SUCCESS").await;
    assert_eq!(execution["output"]["signed"], true);

    let request = &receiver.received()[0];
    assert_eq!(request.json(), json!({"user": "u_1", "amount": 3.5}));
    let id = request.header("webhook-id").unwrap();
    let timestamp = request.header("webhook-timestamp").unwrap();
    assert_eq!(id, execution_id);
    // The host adds the attempt's trace context to the plugin's request.
    let traceparent = request.header("traceparent").expect("a traceparent header");
    assert_eq!(traceparent.len(), 55, "{traceparent}");
    let age = chrono::Utc::now().timestamp() - timestamp.parse::<i64>().unwrap();
    assert!((0..60).contains(&age), "timestamp {timestamp}");
    let key = base64::engine::general_purpose::STANDARD.decode(secret.strip_prefix("whsec_").unwrap()).unwrap();
    let signed = [id.as_bytes(), b".", timestamp.as_bytes(), b".", &request.body].concat();
    let expected = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(hmac_sha256(&key, &signed)));
    assert_eq!(request.header("webhook-signature").unwrap(), expected, "the signature verifies");

    let logs = api.get(&format!("/executions/{execution_id}/logs")).await.text;
    assert!(logs.contains("Plugin webhook version 1"), "{logs}");
    assert!(logs.contains("[plugin webhook] POST http://127.0.0.1"), "{logs}");
    assert!(!logs.contains(secret) && !api.get(&format!("/executions/{execution_id}")).await.text.contains(secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_fail_their_attempts_and_the_worker_carries_on() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let (ok, out) = cli(
        &server,
        &db,
        &["install", component("hostile").to_str().unwrap(), "--name", "hostile", "--memory-mb", "32"],
    );
    assert!(ok, "{out}");
    http_endpoint(&api, &receiver, "normal", "/ok/normal", json!(null)).await;
    let retry = json!({"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 100});
    // A literal `url` the plugin has no grant for is refused at registration, naming the grant.
    let forbidden = format!("{}/ok/forbidden", receiver.base_url);
    let target = receiver.base_url.clone();
    let message = api
        .post(
            "/endpoints",
            &json!({"name": "ungranted", "type": "PLUGIN", "plugin": "hostile",
            "spec": {"mode": "forbidden-host", "url": forbidden}}),
        )
        .await
        .error(422, "INVALID_SPEC");
    assert!(message.starts_with("`url`: ") && message.contains(&format!("--allow-host {target}")), "{message}");
    // Through a config it is known only at delivery, where the refusal fails the attempt.
    api.create("/configs", &json!({"name": "hostile-target", "values": {"url": forbidden}})).await;
    for mode in ["loop", "alloc", "panic", "forbidden-host", "log-flood", "deny-flood"] {
        // The floods test the host's caps, not its deadline, and their 100,000 log records or
        // 12,000 refused requests take a debug build over a second on a loaded machine (both
        // attempts timed out once in CI): they get room. The loop has 1 s, to be cut off.
        let timeout_ms = if mode.ends_with("-flood") { 10_000 } else { 1000 };
        api.create(
            "/endpoints",
            &json!({"name": format!("hostile-{mode}"), "type": "PLUGIN", "plugin": "hostile", "retry_policy": retry,
            "config": "hostile-target", "spec": {"mode": mode, "timeout_ms": timeout_ms, "url": "{{config.url}}"}}),
        )
        .await;
    }
    api.post("/endpoints", &json!({"name": "h", "type": "PLUGIN", "plugin": "hostile", "spec": {"mode": "bogus"}}))
        .await
        .error(422, "INVALID_SPEC");

    let mut hostile = Vec::new();
    for mode in ["loop", "alloc", "panic", "forbidden-host", "log-flood", "deny-flood"] {
        let job = api.create("/jobs", &immediate(&format!("hostile-{mode}"), mode, json!({}))).await;
        hostile.push((mode, job["execution"]["execution_id"].as_str().unwrap().to_owned()));
    }
    // Meanwhile the worker keeps delivering ordinary executions.
    let mut normal = Vec::new();
    for i in 0..10 {
        let job =
            api.create("/jobs", &immediate("normal", &format!("n{i}"), json!({"user_id": "u", "amount": 1}))).await;
        normal.push(job["execution"]["execution_id"].as_str().unwrap().to_owned());
    }
    for id in &normal {
        wait_for_status(&api, id, "SUCCESS").await;
    }

    for (mode, id) in &hostile {
        let expected = if matches!(*mode, "log-flood" | "deny-flood") { "SUCCESS" } else { "FAILED" };
        let execution = wait_for_status(&api, id, expected).await;
        let attempts = api.get(&format!("/executions/{id}/attempts")).await.body["items"].as_array().unwrap().clone();
        let logs = api.get(&format!("/executions/{id}/logs?limit=200")).await.body["items"].as_array().unwrap().clone();
        let log_text: Vec<&str> = logs.iter().map(|l| l["message"].as_str().unwrap()).collect();
        let error = attempts[0]["error"].clone();
        match *mode {
            "loop" => {
                assert_eq!(error["type"], "TIMEOUT", "{error}");
                assert!(error["message"].as_str().unwrap().contains("CPU deadline"), "{error}");
            }
            "alloc" => assert!(error["message"].as_str().unwrap().contains("memory"), "{error}"),
            "panic" => assert!(error["message"].as_str().unwrap().contains("trapped"), "{error}"),
            "forbidden-host" => {
                assert!(
                    log_text.iter().any(|l| l.contains("outbound request denied") && l.contains("not granted")),
                    "{log_text:?}"
                );
                // Refused again on any retry: permanent, with the grant to add.
                assert_eq!((attempts.len(), &error["retryable"]), (1, &json!(false)), "{error}");
                let message = error["message"].as_str().unwrap();
                assert!(message.contains(&format!("--allow-host {target}")), "{message}");
                continue;
            }
            "log-flood" => {
                // The cap is per call: count the records of the attempt that succeeded.
                let last = execution["attempt_count"].as_i64().unwrap();
                let kept = logs
                    .iter()
                    .filter(|l| {
                        l["attempt_number"] == last
                            && l["message"].as_str().unwrap().starts_with("[plugin hostile]")
                            && !l["message"].as_str().unwrap().contains("not kept")
                    })
                    .count();
                assert!(kept <= 100, "{kept} records kept");
                // Listed in the order the plugin wrote them (they are copied in within the
                // same microsecond; the list orders by time, then by random id).
                let numbers: Vec<u64> = logs
                    .iter()
                    .filter(|l| l["attempt_number"] == last)
                    .filter_map(|l| l["message"].as_str()?.strip_prefix("[plugin hostile] flood ")?.parse().ok())
                    .collect();
                assert!(numbers.len() > 10 && numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
                assert!(log_text.iter().any(|l| l.contains("more log records not kept (at most")), "{log_text:?}");
                // 100,000 bytes to stdout: the call still succeeded, and the excess is counted.
                assert!(
                    log_text.iter().any(|l| l.contains("more bytes of stdout/stderr not kept (at most 64 KiB")),
                    "{log_text:?}"
                );
                continue;
            }
            "deny-flood" => {
                // 12,000 refused requests in one call: listed up to 50, then one line says so,
                // and the attempt is recorded (it once overflowed the database's parameters).
                let denied = log_text.iter().filter(|l| l.contains("outbound request denied")).count();
                assert_eq!(denied, 51, "{log_text:?}");
                assert!(log_text.iter().any(|l| l.contains("only the first 50 are listed")), "{log_text:?}");
                assert_eq!(execution["attempt_count"], 1);
                continue;
            }
            _ => unreachable!(),
        }
        // Each other failure is retryable: two attempts per the policy, then FAILED.
        assert_eq!((attempts.len(), execution["attempt_count"].as_u64()), (2, Some(2)), "{mode}");
    }
    assert!(receiver.received().iter().all(|r| r.path != "/ok/forbidden"), "a denied host was contacted");
}

/// A plugin that writes its request body after `handle` (more writes than the host buffers
/// before sending) still delivers it whole: the request is sent while the body is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_written_after_handle_is_streamed_whole() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    install_allowing(&server, &db, "hostile", "streamer", "http://127.0.0.1:*");
    api.create(
        "/endpoints",
        &json!({"name": "streamer", "type": "PLUGIN", "plugin": "streamer",
        "spec": {"mode": "stream-body", "size": 100_000, "timeout_ms": 5000, "url": format!("{}/ok/streamed", receiver.base_url)}}),
    )
    .await;
    let job = api.create("/jobs", &immediate("streamer", "s1", json!({}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(&api, execution_id, "SUCCESS").await;
    assert_eq!(execution["output"]["status_code"], 200, "{execution}");
    let received = receiver.received();
    let streamed = received.iter().find(|r| r.path == "/ok/streamed").expect("the receiver got the request");
    let expected: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    assert!(streamed.body[..] == expected[..], "the body arrived changed ({} bytes)", streamed.body.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_version_applies_from_the_next_attempt() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    upgrade_applies_from_the_next_attempt(&db, &server).await;
}

/// The API that installs and the worker that delivers in separate processes (PostgreSQL): the
/// worker's cached newest version is replaced when the install's NOTIFY arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_plugin_version_reaches_a_worker_in_another_process() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, ServerOptions::new().env("TE_ROLES", "api")).await;
    let _worker = Server::start_with(&db, ServerOptions::new().roles("worker", "Worker running.")).await;
    upgrade_applies_from_the_next_attempt(&db, &server).await;
}

async fn upgrade_applies_from_the_next_attempt(db: &TestDb, server: &Server) {
    let api = server.client();
    let receiver = Receiver::start().await;
    install_allowing(server, db, "hostile", "switch", "http://127.0.0.1:*");
    // A spec both versions accept: the hostile plugin reads `mode`, the signer `url` and `secret`.
    api.create("/endpoints", &json!({"name": "switch", "type": "PLUGIN", "plugin": "switch", "spec": {
        "mode": "ok", "url": format!("{}/ok/switch", receiver.base_url), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})).await;
    let first = api.create("/jobs", &immediate("switch", "v1", json!({}))).await;
    let first_id = first["execution"]["execution_id"].as_str().unwrap().to_owned();
    let done = wait_for_status(&api, &first_id, "SUCCESS").await;
    assert_eq!(done["output"], json!({"ok": first_id}));

    let out = install_allowing(server, db, "webhook-signed", "switch", "http://127.0.0.1:*");
    assert!(out.contains("version 2"), "{out}");
    let second = api.create("/jobs", &immediate("switch", "v2", json!({}))).await;
    let second_id = second["execution"]["execution_id"].as_str().unwrap().to_owned();
    let done = wait_for_status(&api, &second_id, "SUCCESS").await;
    assert_eq!(done["output"]["signed"], true);
    eventually("the signed request", Duration::from_secs(10), || async { receiver.count() == 1 }).await;
    // Each execution records the version that ran it.
    let first_logs = api.get(&format!("/executions/{first_id}/logs")).await.text;
    let second_logs = api.get(&format!("/executions/{second_id}/logs")).await.text;
    assert!(first_logs.contains("Plugin switch version 1"), "{first_logs}");
    assert!(second_logs.contains("Plugin switch version 2"), "{second_logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renderer_plugin_renders_in_place_of_the_built_in_one() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let (ok, out) = cli(&server, &db, &["install", component("dollar-renderer").to_str().unwrap(), "--name", "dollar"]);
    assert!(ok && out.contains("renderer-plugin"), "{out}");
    api.create("/configs", &json!({"name": "dest", "values": {"base": receiver.base_url}})).await;
    // `{{ }}` is literal text to this renderer: only ${…} placeholders are rendered.
    api.create(
        "/endpoints",
        &json!({"name": "dollar", "type": "HTTP", "config": "dest", "renderer": "dollar", "spec": {
            "url": "${config.base}/ok/dollar", "method": "POST",
            "body_template": {"user": "${input.user.id}", "count": "${input.count}", "literal": "{{ not a template }}"}
        }}),
    )
    .await;
    let msg = api
        .post("/endpoints", &json!({"name": "bad", "type": "HTTP", "renderer": "dollar", "spec": {"url": "${env.HOME}", "method": "GET"}}))
        .await
        .error(422, "INVALID_TEMPLATE");
    assert!(msg.contains("renderer 'dollar'"), "{msg}");
    // Renderer plugins get no secrets: a spec that names one is refused, not failed at delivery.
    let with_secret = json!({"name": "bad", "type": "HTTP", "renderer": "dollar",
        "spec": {"url": "http://127.0.0.1:9/x", "method": "POST", "headers": {"Authorization": "Bearer {{secret.token}}"}}});
    let msg = api.post("/endpoints", &with_secret).await.error(422, "INVALID_TEMPLATE");
    assert!(msg.contains("{{secret.token}}") && msg.contains("never given secrets"), "{msg}");
    api.post(
        "/endpoints",
        &json!({"name": "bad", "type": "HTTP", "renderer": "nope", "spec": {"url": "http://x", "method": "GET"}}),
    )
    .await
    .error(422, "INVALID_PLUGIN_REF");

    let job = api.create("/jobs", &immediate("dollar", "d1", json!({"user": {"id": "u_7"}, "count": 3}))).await;
    let first = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    eventually("the first execution to finish", Duration::from_secs(30), || async {
        let status = api.get(&format!("/executions/{first}")).await.body["status"].clone();
        status == "SUCCESS" || status == "FAILED"
    })
    .await;
    let attempts = api.get(&format!("/executions/{first}/attempts")).await.text;
    assert_eq!(api.get(&format!("/executions/{first}")).await.body["status"], "SUCCESS", "{attempts}");
    assert_eq!(receiver.received()[0].json(), json!({"user": "u_7", "count": 3, "literal": "{{ not a template }}"}));
    // A missing value fails the execution at once, naming it.
    let job = api.create("/jobs", &immediate("dollar", "d2", json!({"count": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&api, execution_id, "FAILED").await;
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    assert_eq!(attempts["items"][0]["error"]["type"], "TEMPLATE_RESOLUTION_FAILED");
    assert_eq!(attempts["items"][0]["error"]["variable"], "input.user.id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_name_cannot_reach_a_loopback_address() {
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let port = receiver.base_url.rsplit(':').next().unwrap().to_owned();
    // Granted by name; the name resolves to 127.0.0.1, which is not granted by address.
    install_allowing(&server, &db, "hostile", "sneaky", "http://localhost:*");
    api.create(
        "/endpoints",
        &json!({"name": "sneaky", "type": "PLUGIN", "plugin": "sneaky",
        "spec": {"mode": "forbidden-host", "timeout_ms": 2000, "url": format!("http://localhost:{port}/ok/sneaky")}}),
    )
    .await;
    let job = api.create("/jobs", &immediate("sneaky", "s", json!({}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&api, execution_id, "FAILED").await;
    let logs = api.get(&format!("/executions/{execution_id}/logs")).await.text;
    assert!(logs.contains("an internal address not granted by address"), "{logs}");
    assert_eq!(receiver.count(), 0, "the loopback receiver was reached");
    // The compiled component was cached by its sha256, so a restart does not recompile.
    let cached = std::fs::read_dir(db.dir.path().join("plugin-cache"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!(cached, 1);
}

/// The plugin runtime as the worker uses it, without a server: `webhook-signed` installed as
/// `signed` and `hostile` as `quiet`, and each as `signed-kept` and `kept` (an instance making
/// up to 1000 deliveries), all allowed to reach 127.0.0.1.
async fn plugin_host() -> (tempfile::TempDir, taskexec::plugin::PluginHost) {
    use taskexec::plugin::{PluginHost, PluginLimits, PluginRuntime};
    use taskexec::store::{PluginWrite, Store};

    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn Store> =
        std::sync::Arc::new(taskexec::store::sqlite::SqliteStore::connect(&dir.path().join("t.db"), 2).await.unwrap());
    store.migrate().await.unwrap();
    for (name, file, calls_per_instance) in [
        ("signed", "webhook-signed", 1),
        ("quiet", "hostile", 1),
        ("signed-kept", "webhook-signed", 1000),
        ("kept", "hostile", 1000),
    ] {
        let bytes = std::fs::read(component(file)).unwrap();
        store
            .plugin_insert(&PluginWrite {
                name: name.into(),
                sha256: Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect(),
                bytes,
                world: "transport-plugin".into(),
                grants: json!(["http://127.0.0.1:*"]),
                limits: serde_json::to_value(PluginLimits { calls_per_instance, ..Default::default() }).unwrap(),
            })
            .await
            .unwrap();
    }
    // A memory budget that holds every slot at 64 MiB, so these tests are about the slots (the
    // budget has unit tests of its own in plugin::instances).
    let runtime = PluginRuntime::with_memory_total(Some(dir.path().join("cache")), 64, 128 * 64).unwrap();
    let host = PluginHost::new(runtime, store);
    (dir, host)
}

/// One delivery through plugin `name` with `spec`, as the worker makes it for version 1 of
/// endpoint `id`.
async fn deliver_through(
    host: &taskexec::plugin::PluginHost,
    name: &str,
    spec: &Value,
    id: &str,
) -> Result<taskexec::contract::Receipt, taskexec::contract::Failure> {
    use taskexec::transport::{Delivery, EndpointVersion, Transport};
    let transport = taskexec::transport::wasm::WasmTransport {
        host: host.clone(),
        plugin: taskexec::plugin::PluginRef { name: name.into(), version: None },
    };
    let message = taskexec::contract::Message {
        execution_id: id.into(),
        attempt: 1,
        idempotency_key: id.into(),
        deadline_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + 10_000,
        spec_json: spec.to_string(),
    };
    transport.deliver(message, &Delivery::default().for_endpoint(EndpointVersion { name: id.into(), version: 1 })).await
}

/// More calls one after another than the runtime has instance slots, through the plugin
/// transport as the worker calls it: each call's store goes back to the pool (by a later call's
/// upkeep), so none waits for a slot a finished call still holds. Both kinds of call: one that
/// waits on the network (its upkeep runs during the wait) and one that never does (after it).
/// And a plugin that reuses instances, each call for an endpoint of its own: every call parks
/// its instance, and once they fill the pool a call takes the slot of the one parked longest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_instance_pool_each_get_a_slot() {
    let (_dir, host) = plugin_host().await;
    let receiver = Receiver::start().await;
    let calls = 300; // the pool has 128 slots
    for (name, spec) in [
        (
            "signed",
            json!({"url": format!("{}/ok/pooled", receiver.base_url), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
        ),
        ("quiet", json!({"mode": "ok"})),
        ("kept", json!({"mode": "ok"})),
    ] {
        let all = async {
            for i in 0..calls {
                if let Err(failure) = deliver_through(&host, name, &spec, &format!("exec_{name}_{i}")).await {
                    panic!("call {i} of {name} failed: {failure:?}");
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(120), all)
            .await
            .unwrap_or_else(|_| panic!("{name}: {calls} calls in a row did not finish: a call waited for a slot"));
    }
    assert_eq!(receiver.received().iter().filter(|r| r.path == "/ok/pooled").count(), calls);
    // Held now: each plugin's spare, at most the last call's store, retired, and the parked
    // instances of the last of the 300 endpoints `kept` delivered for, which fill the rest.
    let parked = host.runtime.parked_instances();
    assert!((100..=128).contains(&parked), "{parked} instances parked: each of `kept`'s last calls parks its own");
    // Unused for 10 s, they are dropped and their slots freed, with no call to prompt it.
    eventually("the parked instances dropped after 10 s unused", Duration::from_secs(30), || async {
        host.runtime.parked_instances() == 0 && host.runtime.free_slots() > 100
    })
    .await;
}

/// More calls at once than the pool has slots, of a plugin that reuses instances: a call that
/// finishes while others wait for a slot frees its slot for them instead of parking its
/// instance on it (which would hold them until the parked instance had been idle for 10 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_for_a_slot_gets_one_before_calls_park() {
    let (_dir, host) = plugin_host().await;
    let receiver = Receiver::start().await;
    let spec =
        json!({"url": format!("{}/slow/200", receiver.base_url), "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
    let calls = 150; // the pool has 128 slots
    let mut all = tokio::task::JoinSet::new();
    for i in 0..calls {
        let (host, spec) = (host.clone(), spec.clone());
        all.spawn(async move { deliver_through(&host, "signed-kept", &spec, &format!("exec_wait_{i}")).await });
    }
    // Two waves of 200 ms deliveries; held behind parked instances they would take over 10 s.
    let results = tokio::time::timeout(Duration::from_secs(8), all.join_all())
        .await
        .expect("calls waiting for a slot were held up by parked instances");
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    assert_eq!(receiver.received().len(), calls);
}

/// The host hands a plugin the response its `handle` already has; asked for it a second time it
/// answers that it was taken (wasi:http's rule), and an answer never asked for is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_taken_once() {
    let (_dir, host) = plugin_host().await;
    let receiver = Receiver::start().await;
    let spec = json!({"mode": "answer-twice", "url": format!("{}/ok/twice", receiver.base_url)});
    let receipt =
        deliver_through(&host, "quiet", &spec, "exec_twice").await.expect("the second get finds the answer taken");
    assert_eq!(serde_json::from_str::<Value>(&receipt.output_json).unwrap()["status_code"], 200);
    let paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    assert!(paths.contains(&"/ok/twice/untaken".to_owned()) && paths.contains(&"/ok/twice".to_owned()), "{paths:?}");
}

/// `http-client.send`, called as no SDK would: the answer is cut at the request's limit (and
/// says so), a hop-by-hop header is refused by name before anything is sent, and a host the
/// plugin was not granted is refused as wasi:http refuses it. Headers go in the order given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_one_call_keeps_to_the_same_rules() {
    let (_dir, host) = plugin_host().await;
    let receiver = Receiver::start().await;
    let spec = json!({
        "mode": "one-call",
        "url": format!("{}/mirror", receiver.base_url),
        "ungranted": "http://localhost:9/never",
    });
    let receipt =
        deliver_through(&host, "quiet", &spec, "exec_one_call").await.expect("the plugin returns what it saw");
    let seen: Value = serde_json::from_str(&receipt.output_json).unwrap();
    assert_eq!(seen["mirrored"], json!({"status": 200, "body": "abcdefghij", "truncated": true}), "{seen}");
    assert_eq!(
        seen["hop_by_hop"],
        "invalid-request: headers: `Connection` is set by the host and may not be sent by a plugin"
    );
    assert_eq!(seen["ungranted"], "not-granted: http://localhost:9", "{seen}");
    let sent = receiver.received();
    assert_eq!(
        sent.len(),
        1,
        "only the first request may reach the receiver: {:?}",
        sent.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    let tags: Vec<_> = sent[0].headers.get_all("x-tag").iter().map(|v| v.to_str().unwrap().to_owned()).collect();
    assert_eq!(tags, ["one", "two"]);
    assert_eq!(sent[0].body.len(), 100);
}

/// Run `taskexec plugin ARGS` with no server; (exit success, stdout, stderr).
fn offline(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    let out = command(&all, &[], dir).stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A plugin author's path without the repository: `plugin new` scaffolds a crate that builds,
/// `plugin check` explains its imports, `plugin run` delivers through the same sandbox with no
/// server, and says why when it cannot; `plugin wit` writes the contract. The `ntfy` example
/// (written on the SDK) runs locally and through the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_author_scaffolds_builds_checks_runs_and_installs_a_plugin() {
    let work = tempfile::tempdir().unwrap();
    let receiver = Receiver::start().await;
    let (ok, out, err) = offline(&["new", "hello-notify", "--dir", work.path().to_str().unwrap()], work.path());
    assert!(ok, "{out}{err}");
    assert!(out.contains("cargo build --release --target wasm32-wasip2"), "{out}");
    let (ok, _, err) = offline(&["new", "hello-notify", "--dir", work.path().to_str().unwrap()], work.path());
    assert!(!ok && err.contains("already exists"), "{err}");
    // Built as its author would, sharing the plugins' target directory (and its compiled
    // dependencies) to keep the test quick.
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/target");
    let built = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(work.path().join("hello-notify/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .unwrap();
    assert!(built.success(), "the scaffold builds");
    let wasm = target.join("wasm32-wasip2/release/hello_notify.wasm");
    let wasm = wasm.to_str().unwrap();
    let (ok, out, err) = offline(&["check", wasm], work.path());
    assert!(ok && out.contains("a valid transport-plugin component"), "{out}{err}");
    assert!(out.contains("outbound HTTP in one call, only to the hosts granted with --allow-host"), "{out}");

    let spec = json!({"url": format!("{}/ok/hello", receiver.base_url), "text": "{{input.text}}"}).to_string();
    let (ok, out, err) = offline(
        &["run", wasm, "--spec", &spec, "--input", r#"{"text": "hi"}"#, "--allow-host", "http://127.0.0.1:*"],
        work.path(),
    );
    assert!(ok, "{out}{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["delivered"], true, "{out}");
    assert_eq!(shown["output"]["status_code"], 200, "{out}");
    assert!(err.contains("answered 200"), "the plugin's logs: {err}");
    let got = &receiver.received()[0];
    assert_eq!((got.json(), got.header("idempotency-key")), (json!({"text": "hi"}), Some("exec_local".to_owned())));
    // Not granted: refused, permanently, naming the flag to add.
    let (ok, out, _) = offline(&["run", wasm, "--spec", &spec, "--input", r#"{"text": "hi"}"#], work.path());
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert!(!ok && shown["failure"]["retryable"] == false, "{out}");
    let port = receiver.base_url.rsplit(':').next().unwrap();
    assert!(
        shown["failure"]["message"].as_str().unwrap().contains(&format!("--allow-host http://127.0.0.1:{port}")),
        "{out}"
    );

    // ntfy, on the SDK: a refused answer is a retryable failure, a missing field is named.
    let ntfy = component("ntfy");
    let ntfy = ntfy.to_str().unwrap();
    let spec = |server: &str| {
        json!({"server": server, "topic": "alerts", "message": "{{input.text}}", "title": "Disk",
               "priority": 4, "tags": ["warning", "disk"], "token": "{{secret.ntfy}}"})
        .to_string()
    };
    let failing = spec(&format!("{}/fail", receiver.base_url));
    let (ok, out, _) = offline(
        &[
            "run",
            ntfy,
            "--spec",
            &failing,
            "--input",
            r#"{"text": "x"}"#,
            "--secret",
            "ntfy=tk",
            "--allow-host",
            "http://127.0.0.1:*",
        ],
        work.path(),
    );
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert!(!ok, "{out}");
    assert_eq!(
        (&shown["failure"]["kind"], &shown["failure"]["retryable"]),
        (&json!("rejected (500)"), &json!(true)),
        "{out}"
    );
    let (ok, _, err) =
        offline(&["run", ntfy, "--spec", r#"{"server": "http://127.0.0.1:1", "message": "m"}"#], work.path());
    assert!(!ok && err.contains("missing field `topic`"), "{err}");

    let (ok, _, err) = offline(&["wit", work.path().join("wit").to_str().unwrap()], work.path());
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(work.path().join("wit/worlds.wit")).unwrap().contains("world transport-plugin"));
    assert!(work.path().join("wit/deps/http.wit").exists());

    // The same component through the service: installed, registered, delivered.
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    install_allowing(&server, &db, "ntfy", "ntfy", "http://127.0.0.1:*");
    api.create("/secrets", &json!({"name": "ntfy", "value": "tk-secret-value"})).await;
    let spec: Value = serde_json::from_str(&spec(&receiver.base_url)).unwrap();
    api.create("/endpoints", &json!({"name": "push", "type": "PLUGIN", "plugin": "ntfy", "spec": spec})).await;
    let job = api.create("/jobs", &immediate("push", "n1", json!({"text": "disk 91% full"}))).await;
    wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "SUCCESS").await;
    let pushed = receiver.received().into_iter().find(|r| r.path == "/alerts").expect("the push");
    assert_eq!(String::from_utf8_lossy(&pushed.body), "disk 91% full");
    assert_eq!(pushed.header("title").as_deref(), Some("Disk"));
    assert_eq!(pushed.header("priority").as_deref(), Some("4"));
    assert_eq!(pushed.header("tags").as_deref(), Some("warning,disk"));
    assert_eq!(pushed.header("authorization").as_deref(), Some("Bearer tk-secret-value"));
}

/// `plugin@N` pins an endpoint to a version; `plugin rollback` installs an earlier version's
/// component again as the newest; one version can be removed unless an endpoint is pinned to
/// it. The endpoint-level `timeout_ms` bounds a plugin's call, and a built-in transport's spec.
async fn versions_are_pinned_rolled_back_and_removed(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    install_allowing(&server, &db, "hostile", "switch", "http://127.0.0.1:*");
    install_allowing(&server, &db, "webhook-signed", "switch", "http://127.0.0.1:*");
    let spec = json!({"mode": "ok", "url": format!("{}/ok/switch", receiver.base_url),
                      "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
    let pinned = api
        .create("/endpoints", &json!({"name": "pinned", "type": "PLUGIN", "plugin": "switch@1", "spec": spec}))
        .await;
    assert_eq!((&pinned["plugin"], &pinned["timeout_ms"]), (&json!("switch@1"), &json!(30000)), "{pinned}");
    api.create("/endpoints", &json!({"name": "newest", "type": "PLUGIN", "plugin": "switch", "spec": spec})).await;
    let run = |endpoint: &'static str, key: &'static str| {
        let api = api.clone();
        async move {
            let job = api.create("/jobs", &immediate(endpoint, key, json!({}))).await;
            let id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
            let execution = wait_for_status(&api, &id, "SUCCESS").await;
            let logs = api.get(&format!("/executions/{id}/logs")).await.text;
            (execution["output"].clone(), logs)
        }
    };
    let (output, logs) = run("pinned", "p1").await;
    assert!(output.get("ok").is_some(), "version 1 (hostile, mode ok) ran: {output}");
    assert!(logs.contains("Plugin switch version 1"), "{logs}");
    let (output, _) = run("newest", "n1").await;
    assert_eq!(output["signed"], true, "the newest (the signer) ran: {output}");

    let message = api
        .post("/endpoints", &json!({"name": "x", "type": "PLUGIN", "plugin": "switch@9", "spec": spec}))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    assert!(message.contains("no version 9") && message.contains("installed: 1, 2"), "{message}");
    let message = api
        .post("/endpoints", &json!({"name": "x", "type": "PLUGIN", "plugin": "switch@0", "spec": spec}))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("whole number from 1"), "{message}");
    let message = api.delete("/plugins/switch/versions/1").await.error(409, "CONFLICT");
    assert!(message.contains("pinned"), "{message}");

    // Roll back: version 3 is version 1's component; unpinned endpoints use it next.
    let (ok, out) = cli(&server, &db, &["rollback", "switch"]);
    assert!(ok && out.contains("version 3"), "{out}");
    let versions = api.get("/plugins/switch").await.body["versions"].clone();
    assert_eq!(versions[2]["sha256"], versions[0]["sha256"], "{versions}");
    let (output, logs) = run("newest", "n2").await;
    assert!(output.get("ok").is_some() && logs.contains("Plugin switch version 3"), "{output} {logs}");
    let (ok, out) = cli(&server, &db, &["remove", "switch", "--version", "2"]);
    assert!(ok, "{out}");
    let left: Vec<i64> = api.get("/plugins/switch").await.body["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(left, [1, 3]);
    api.delete("/plugins/switch/versions/9").await.error(404, "PLUGIN_NOT_FOUND");
    api.post("/plugins/switch/rollback", &json!({"to": 3})).await.error(400, "INVALID_REQUEST");

    // timeout_ms on the endpoint: a plugin that loops is stopped at it.
    let looping = json!({"mode": "loop", "url": spec["url"], "secret": spec["secret"]});
    let endpoint = api
        .create(
            "/endpoints",
            &json!({"name": "spin", "type": "PLUGIN", "plugin": "switch@1", "timeout_ms": 300, "spec": looping}),
        )
        .await;
    assert_eq!(endpoint["timeout_ms"], 300);
    let job = api.create("/jobs", &immediate("spin", "s1", json!({}))).await;
    let failed = wait_for_status(&api, job["execution"]["execution_id"].as_str().unwrap(), "FAILED").await;
    assert_eq!(failed["output"]["error"]["type"], "TIMEOUT", "{failed}");
    assert!(failed["duration_ms"].as_i64().unwrap() < 5000, "stopped near 300 ms: {failed}");
    // For a built-in transport it is written into the spec; two different values are refused.
    let http = api
        .create(
            "/endpoints",
            &json!({"name": "h", "type": "HTTP", "timeout_ms": 1234,
                                      "spec": {"url": spec["url"], "method": "POST"}}),
        )
        .await;
    assert_eq!((&http["timeout_ms"], &http["spec"]["timeout_ms"]), (&json!(1234), &json!(1234)), "{http}");
    let message = api
        .post(
            "/endpoints",
            &json!({"name": "h2", "type": "HTTP", "timeout_ms": 100,
                                    "spec": {"url": spec["url"], "method": "POST", "timeout_ms": 200}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.contains("timeout_ms") && message.contains("spec.timeout_ms"), "{message}");
    for bad in [0, 300_001] {
        api.post(
            "/endpoints",
            &json!({"name": "h3", "type": "HTTP", "timeout_ms": bad,
                                       "spec": {"url": spec["url"], "method": "POST"}}),
        )
        .await
        .error(400, "INVALID_REQUEST");
    }
}

/// A plugin installed with `calls_per_instance` N makes up to N deliveries in one instance,
/// and only deliveries of one endpoint version share one: what it keeps in its globals never
/// reaches another endpoint, a new endpoint version, or the call after a trap. Installed as by
/// default, every delivery starts fresh.
async fn instances_are_reused_only_within_one_endpoint_version(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let file = component("hostile");
    let (ok, out) =
        cli(&server, &db, &["install", file.to_str().unwrap(), "--name", "keeper", "--calls-per-instance", "3"]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&server, &db, &["install", file.to_str().unwrap(), "--name", "fresh"]);
    assert!(ok, "{out}");
    let plugin = api.get("/plugins/keeper").await.body;
    assert_eq!(plugin["versions"][0]["limits"]["calls_per_instance"], 3, "{plugin}");
    for bad in ["0", "1001", "some"] {
        let bytes = std::fs::read(&file).unwrap();
        let message =
            upload(&api, &format!("name=keeper&calls_per_instance={bad}"), bytes).await.error(400, "INVALID_REQUEST");
        assert!(message.starts_with("`calls_per_instance`: "), "{message}");
    }
    let renderer = std::fs::read(component("dollar-renderer")).unwrap();
    let message = upload(&api, "name=dollars&calls_per_instance=2", renderer).await.error(400, "INVALID_REQUEST");
    assert!(message.contains("transport plugins only") && message.contains("renderer-plugin"), "{message}");

    let retry = json!({"max_attempts": 2, "backoff": "fixed", "initial_delay_ms": 100});
    let endpoint = |name: &str, plugin: &str, spec: Value| json!({"name": name, "type": "PLUGIN", "plugin": plugin, "retry_policy": retry, "spec": spec});
    for (name, plugin, mark) in [("mark-a", "keeper", "a"), ("mark-b", "keeper", "b"), ("fresh-a", "fresh", "a")] {
        api.create("/endpoints", &endpoint(name, plugin, json!({"mode": "remember", "mark": mark}))).await;
    }
    // One delivery at a time, each finished before the next: (calls, previous mark) as the
    // plugin saw them.
    let mut sequence = 0;
    let mut deliver = async |endpoint: &str| {
        sequence += 1;
        let job = api.create("/jobs", &immediate(endpoint, &format!("k{sequence}"), json!({}))).await;
        let (execution, attempts) = finished(&api, &job, "SUCCESS").await;
        let output = &execution["output"];
        (output["calls"].as_u64().unwrap(), output["previous"].as_str().unwrap().to_owned(), attempts.len())
    };
    let seen = [
        deliver("mark-a").await,
        deliver("mark-a").await,
        deliver("mark-a").await,
        // Its instance made its 3 calls: a fresh one.
        deliver("mark-a").await,
        // Another endpoint never gets mark-a's instance.
        deliver("mark-b").await,
        deliver("mark-a").await,
        deliver("mark-b").await,
    ];
    let expected = [(1, ""), (2, "a"), (3, "a"), (1, ""), (1, ""), (2, "a"), (2, "b")];
    for (i, ((calls, previous, _), (want_calls, want_previous))) in seen.iter().zip(expected).enumerate() {
        assert_eq!((*calls, previous.as_str()), (want_calls, want_previous), "delivery {i}: {seen:?}");
    }
    // A new version of the endpoint is a scope of its own.
    let updated =
        api.put("/endpoints/mark-a", &endpoint("mark-a", "keeper", json!({"mode": "remember", "mark": "a2"}))).await;
    assert_eq!((updated.status.as_u16(), &updated.body["version"]), (200, &json!(2)), "{}", updated.text);
    assert_eq!(&deliver("mark-a").await.1, "", "a new endpoint version shares no instance");
    // The default: a fresh instance for every delivery.
    assert_eq!(deliver("fresh-a").await.0, 1);
    assert_eq!(deliver("fresh-a").await.0, 1);

    // A call that traps: its instance is dropped, and the retry starts in a fresh one.
    api.create("/endpoints", &endpoint("trap", "keeper", json!({"mode": "remember", "mark": "t", "panic_at": 2})))
        .await;
    assert_eq!(deliver("trap").await.0, 1);
    let (calls, previous, attempts) = deliver("trap").await;
    assert_eq!((calls, previous.as_str(), attempts), (1, "", 2), "the retry after the trap ran in a fresh instance");
}

/// The execution `job` created, once it is `status`; with its attempts.
async fn finished(api: &Client, job: &Value, status: &str) -> (Value, Vec<Value>) {
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(api, execution_id, status).await;
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    (execution, attempts["items"].as_array().unwrap().clone())
}

async fn a_classifier_overrules_the_transport_on_the_answers_body(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let file = component("json-status");
    let (ok, out) = cli(&server, &db, &["install", file.to_str().unwrap(), "--name", "json-status"]);
    assert!(ok && out.contains("classifier-plugin"), "{out}");
    install_allowing(&server, &db, "webhook-signed", "webhook", "http://127.0.0.1:*");

    // Registration checks the classifier and lets it check its config.
    let endpoint = |name: &str, path: &str, classifier: Value| {
        json!({"name": name, "type": "HTTP", "classifier": classifier,
               "retry_policy": {"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 50},
               "spec": {"url": format!("{}{path}", receiver.base_url), "method": "POST",
                        "body_template": {"ok": "{{input.ok}}", "error": "{{input.error}}", "retry_in_ms": "{{input.retry_in_ms}}"}}})
    };
    let message = api
        .post("/endpoints", &endpoint("x", "/mirror", json!({"plugin": "json-status", "config": {"feild": "/ok"}})))
        .await
        .error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`classifier.config`") && message.contains("feild"), "{message}");
    let message = api
        .post("/endpoints", &endpoint("x", "/mirror", json!({"plugin": "webhook"})))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    assert!(message.contains("is a transport-plugin, not a classifier-plugin"), "{message}");
    api.post("/endpoints", &endpoint("x", "/mirror", json!({"plugin": "json-status@7"})))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    let created = api
        .create(
            "/endpoints",
            &endpoint("judged", "/mirror", json!({"plugin": "json-status", "config": {"permanent": ["invalid"]}})),
        )
        .await;
    assert_eq!(created["classifier"], json!({"plugin": "json-status", "config": {"permanent": ["invalid"]}}));

    // The receiver answers 200 each time; the body decides.
    let good =
        api.create("/jobs", &immediate("judged", "good", json!({"ok": true, "error": "", "retry_in_ms": 0}))).await;
    let (execution, attempts) = finished(&api, &good, "SUCCESS").await;
    assert_eq!((execution["output"]["status_code"].as_u64(), attempts.len()), (Some(200), 1), "{execution}");

    let invalid = api
        .create(
            "/jobs",
            &immediate("judged", "invalid", json!({"ok": "invalid", "error": "no such account", "retry_in_ms": 0})),
        )
        .await;
    let (execution, attempts) = finished(&api, &invalid, "FAILED").await;
    assert_eq!(attempts.len(), 1, "a permanent verdict is not retried: {attempts:?}");
    let error = &attempts[0]["error"];
    assert_eq!(
        (
            error["type"].as_str(),
            error["verdict"].as_str(),
            error["status_code"].as_u64(),
            error["classifier"].as_str()
        ),
        (Some("CLASSIFIED_FAILURE"), Some("permanent"), Some(200), Some("json-status@1")),
        "{error}"
    );
    assert!(error["message"].as_str().unwrap().contains("no such account"), "{error}");
    let logs = api.get(&format!("/executions/{}/logs", execution["execution_id"].as_str().unwrap())).await.text;
    assert!(logs.contains("Classifier json-status@1: permanent failure"), "{logs}");

    let busy = api
        .create("/jobs", &immediate("judged", "busy", json!({"ok": false, "error": "busy", "retry_in_ms": 400})))
        .await;
    let (_, attempts) = finished(&api, &busy, "FAILED").await;
    assert_eq!(attempts.len(), 3, "a retry verdict is retried while attempts are left: {attempts:?}");
    for i in 1..3 {
        let gap = at_of(&attempts[i], "started_at") - at_of(&attempts[i - 1], "completed_at");
        assert!(gap >= chrono::Duration::milliseconds(390), "the body's retry_in_ms, not the 50 ms backoff: {gap}");
        assert_eq!(attempts[i]["error"]["verdict"], "retry");
    }

    // A classifier can open the circuit at once: no worker sends until the cool-down passes.
    api.create(
        "/endpoints",
        &endpoint(
            "tripped",
            "/json-switch/tripped",
            json!({"plugin": "json-status", "config": {"open_circuit": [false], "cooldown_ms": 1500}}),
        ),
    )
    .await;
    let job = api.create("/jobs", &immediate("tripped", "t", json!({"ok": 0, "error": "", "retry_in_ms": 0}))).await;
    eventually("the circuit opens on the first answer", Duration::from_secs(20), || async {
        api.get("/endpoints/tripped").await.body["circuit"]["state"] == "open"
    })
    .await;
    let circuit = api.get("/endpoints/tripped").await.body["circuit"].clone();
    assert_eq!(circuit["consecutive_failures"], 1, "one failure was enough: {circuit}");
    assert!(circuit["last_error"].as_str().unwrap().contains("not yet"), "{circuit}");
    receiver.heal("tripped");
    let (_, attempts) = finished(&api, &job, "SUCCESS").await;
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let gap = at_of(&attempts[1], "started_at") - at_of(&attempts[0], "completed_at");
    assert!(gap >= chrono::Duration::milliseconds(1400), "the retry waited for the cool-down: {gap}");
    assert_eq!(receiver.count_of("/json-switch/tripped"), 2);
    assert_eq!(api.get("/endpoints/tripped").await.body["circuit"]["state"], "closed");

    // A classifier in use cannot be removed.
    let (ok, out) = cli(&server, &db, &["remove", "json-status"]);
    assert!(!ok && out.contains("409") && out.contains("judged"), "{out}");
}

fn at_of(attempt: &Value, field: &str) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(attempt[field].as_str().unwrap()).unwrap()
}

async fn a_schedule_plugin_fires_a_cron_job_on_its_own_calendar(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    let (ok, out) = cli(&server, &db, &["install", component("business-days").to_str().unwrap(), "--name", "workdays"]);
    assert!(ok && out.contains("schedule-plugin"), "{out}");
    install_allowing(&server, &db, "webhook-signed", "webhook", "http://127.0.0.1:*");
    api.create(
        "/endpoints",
        &json!({"name": "desk", "type": "HTTP", "spec": {"url": format!("{}/ok/desk", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let cron = |schedule: Value, zone: &str, starts_at: &str| json!({"endpoint": "desk", "trigger": "CRON", "schedule": schedule, "timezone": zone, "starts_at": starts_at});

    // Refusals name the field.
    let every_day = json!({"plugin": "workdays", "spec": {"times": ["02:30"], "weekdays": [1, 2, 3, 4, 5, 6, 7]}});
    let mut both = cron(every_day.clone(), "UTC", "2026-12-01T00:00:00Z");
    both["cron"] = json!("* * * * *");
    let message = api.post("/jobs", &both).await.error(400, "INVALID_REQUEST");
    assert!(message.starts_with("`schedule`"), "{message}");
    let bad = json!({"plugin": "workdays", "spec": {"times": ["25:00"]}});
    let message = api.post("/jobs", &cron(bad, "UTC", "2026-12-01T00:00:00Z")).await.error(422, "INVALID_CRON");
    assert!(message.starts_with("`schedule.spec`") && message.contains("times"), "{message}");
    let message = api
        .post("/jobs", &cron(json!({"plugin": "webhook"}), "UTC", "2026-12-01T00:00:00Z"))
        .await
        .error(422, "INVALID_PLUGIN_REF");
    assert!(message.contains("not a schedule-plugin"), "{message}");

    // The host places the plugin's local times by cron's rules: 02:30 on 2027-03-14 does not
    // exist in New York (skipped), and 01:30 on 2027-11-07 happens twice (the first).
    let job = api.create("/jobs", &cron(every_day, "America/New_York", "2027-03-14T06:00:00Z")).await;
    assert_eq!(job["next_run_at"], "2027-03-15T02:30:00-04:00", "{job}");
    assert_eq!(job["schedule"]["plugin"], "workdays");
    let fall_back = json!({"plugin": "workdays", "spec": {"times": ["01:30"], "weekdays": [7]}});
    let job = api.create("/jobs", &cron(fall_back, "America/New_York", "2027-11-07T04:00:00Z")).await;
    assert_eq!(job["next_run_at"], "2027-11-07T01:30:00-04:00", "{job}");
    // The same kind of job from the command line.
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let spec = r#"{"times": ["01:30"], "weekdays": [7]}"#;
    let args = [
        "jobs",
        "create",
        "--endpoint",
        "desk",
        "--schedule",
        "workdays",
        "--spec",
        spec,
        "--tz",
        "America/New_York",
        "--json",
    ];
    let out = command(&args, &env, db.dir.path()).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["schedule"], json!({"plugin": "workdays", "spec": {"times": ["01:30"], "weekdays": [7]}}), "{job}");
    assert_eq!(job["timezone"], "America/New_York");

    // Fired at the plugin's times: two seconds a few seconds from now, every day of the week.
    let first = chrono::Utc::now() + chrono::Duration::seconds(3);
    let second = first + chrono::Duration::seconds(2);
    let times: Vec<String> = [first, second].iter().map(|t| t.format("%H:%M:%S").to_string()).collect();
    if first.date_naive() != second.date_naive() {
        return; // Across midnight UTC the two times are not on one day; nothing to check then.
    }
    let soon = json!({"plugin": "workdays@1", "spec": {"times": times, "weekdays": [1, 2, 3, 4, 5, 6, 7]}});
    let job =
        api.create("/jobs", &json!({"endpoint": "desk", "trigger": "CRON", "schedule": soon, "timezone": "UTC"})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("both ticks are delivered", Duration::from_secs(20), || async { receiver.count_of("/ok/desk") >= 2 })
        .await;
    let executions = api.get(&format!("/jobs/{job_id}/executions")).await.body;
    let mut fired: Vec<String> = executions["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["scheduled_at"].as_str().unwrap_or("").to_owned())
        .collect();
    fired.sort();
    let expected: Vec<String> = [first, second].iter().map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string()).collect();
    assert_eq!(fired.iter().map(|t| t[..19].to_owned()).collect::<Vec<_>>(), expected, "{executions}");
    let tomorrow = (first + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%S").to_string();
    let job = api.get(&format!("/jobs/{job_id}")).await.body;
    assert!(job["next_run_at"].as_str().unwrap().starts_with(&tomorrow), "the next is tomorrow's first: {job}");

    // An active job keeps its plugin installed; a new version may move it to cron.
    let (ok, out) = cli(&server, &db, &["remove", "workdays"]);
    assert!(!ok && out.contains("409") && out.contains(&job_id), "{out}");
    let updated = api.put(&format!("/jobs/{job_id}"), &json!({"cron": "0 9 * * *"})).await.body;
    assert_eq!((updated["cron"].as_str(), updated.get("schedule")), (Some("0 9 * * *"), None), "{updated}");
}

/// `plugin run` on the deciding worlds, with no server: a classifier's verdict on an answer,
/// a schedule's next local times; a config or spec the plugin refuses is an error naming it.
#[test]
fn a_classifier_and_a_schedule_run_offline() {
    let dir = tempfile::tempdir().unwrap();
    let classifier = component("json-status");
    let answer = r#"{"status": 200, "headers": {"X-Retry-In": "3"}, "body": "{\"ok\": \"invalid\", \"error\": \"no such account\"}"}"#;
    let (ok, out, err) = offline(
        &["run", classifier.to_str().unwrap(), "--config", r#"{"permanent": ["invalid"]}"#, "--answer", answer],
        dir.path(),
    );
    assert!(ok, "{err}");
    let verdict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict, json!({"verdict": "permanent", "message": "/ok is \"invalid\": no such account"}));
    let (ok, _, err) =
        offline(&["run", classifier.to_str().unwrap(), "--config", r#"{"feild": 1}"#, "--answer", answer], dir.path());
    assert!(!ok && err.contains("check refused the config") && err.contains("feild"), "{err}");

    let schedule = component("business-days");
    let spec = r#"{"times": ["09:30", "16:00"], "holidays": ["2026-12-25"]}"#;
    let (ok, out, err) = offline(
        &["run", schedule.to_str().unwrap(), "--spec", spec, "--after", "2026-12-24T10:00:00", "--ticks", "3"],
        dir.path(),
    );
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["2026-12-24T16:00:00 Thu", "2026-12-28T09:30:00 Mon", "2026-12-28T16:00:00 Mon"],
        "Christmas and the weekend are skipped"
    );
    let (ok, _, err) = offline(&["run", schedule.to_str().unwrap(), "--spec", r#"{"times": ["25:00"]}"#], dir.path());
    assert!(!ok && err.contains("check refused the spec") && err.contains("times"), "{err}");
}

/// A plugin produces to Kafka (librdkafka's mock cluster) and appends to a Redis Stream (the
/// real server) through the host's own clients: the records carry the attempt's execution id,
/// the output is the built-in transports', and each destination must be granted — by address
/// when it is an internal one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_produces_and_appends_through_the_hosts_clients() {
    use rdkafka::message::{Headers, Message};
    let cluster = rdkafka::mocking::MockCluster::new(1).unwrap();
    cluster.create_topic("fanned", 1, 1).unwrap();
    let db = TestDb::new(Backend::Sqlite).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let fan_out = component("fan-out");
    let install = |name: &str, grants: &[&str]| {
        let mut args = vec!["install", fan_out.to_str().unwrap(), "--name", name];
        for grant in grants {
            args.extend(["--allow-host", grant]);
        }
        let (ok, out) = cli(&server, &db, &args);
        assert!(ok, "{out}");
    };
    install("fan", &["kafka://127.0.0.1:*", "redis://127.0.0.1:6379"]);
    install("kafka-only", &["kafka://127.0.0.1:*"]);
    install("by-name", &["redis://localhost:6379"]);

    let stream = format!("taskexec-e2e:{}", uuid::Uuid::new_v4().simple());
    let kafka = json!({"bootstrap_servers": cluster.bootstrap_servers(), "topic": "fanned",
                       "key_template": "{{input.id}}", "value_template": {"id": "{{input.id}}"}});
    let redis = |url: &str| json!({"redis_url": url, "stream": stream, "fields_template": {"id": "{{input.id}}"}});
    let endpoint = |name: &str, plugin: &str, spec: Value| {
        json!({"name": name, "type": "PLUGIN", "plugin": plugin, "spec": spec,
               "retry_policy": {"max_attempts": 3, "backoff": "fixed", "initial_delay_ms": 50}})
    };
    // The plugin has the host read the built-in specs, so registration refuses as for KAFKA.
    let mut bad = kafka.clone();
    bad["topic"] = json!("no spaces allowed");
    let message =
        api.post("/endpoints", &endpoint("bad", "fan", json!({"kafka": bad}))).await.error(422, "INVALID_SPEC");
    assert!(message.contains("`kafka`: topic: Kafka topic names"), "{message}");
    api.create(
        "/endpoints",
        &endpoint("fan", "fan", json!({"kafka": kafka, "redis": redis("redis://127.0.0.1:6379")})),
    )
    .await;

    let job = api.create("/jobs", &immediate("fan", "f1", json!({"id": "k-1"}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    let (execution, attempts) = finished(&api, &job, "SUCCESS").await;
    assert_eq!(attempts.len(), 1);

    let record = next_record(&kafka_consumer(&cluster.bootstrap_servers(), "fanned"));
    assert_eq!(record.key(), Some(&b"k-1"[..]));
    assert_eq!(serde_json::from_slice::<Value>(record.payload().unwrap()).unwrap(), json!({"id": "k-1"}));
    let header = record.headers().unwrap().iter().find(|h| h.key == "te-execution-id").unwrap();
    assert_eq!(header.value, Some(execution_id.as_bytes()));
    assert_eq!(execution["output"]["kafka"], json!({"partition": record.partition(), "offset": record.offset()}));

    let mut con =
        redis::Client::open("redis://127.0.0.1:6379").unwrap().get_multiplexed_async_connection().await.unwrap();
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1);
    let fields: std::collections::HashMap<_, _> = entries[0].1.iter().cloned().collect();
    assert_eq!((fields["te_execution_id"].as_str(), fields["id"].as_str()), (execution_id.as_str(), "k-1"));
    assert_eq!(execution["output"]["redis"], json!({"message_id": entries[0].0, "stream": stream}));

    // Not granted: the attempt fails at once, naming the grant, and is not retried.
    api.create("/endpoints", &endpoint("narrow", "kafka-only", json!({"redis": redis("redis://127.0.0.1:6379")})))
        .await;
    let job = api.create("/jobs", &immediate("narrow", "n1", json!({"id": "n-1"}))).await;
    let (_, attempts) = finished(&api, &job, "FAILED").await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let error = attempts[0]["error"]["message"].as_str().unwrap();
    assert!(error.contains("--allow-host redis://127.0.0.1:6379"), "{error}");
    // Granted by name, but the name is loopback, which only a grant by address opens.
    api.create("/endpoints", &endpoint("by-name", "by-name", json!({"redis": redis("redis://localhost:6379")}))).await;
    let job = api.create("/jobs", &immediate("by-name", "b1", json!({"id": "b-1"}))).await;
    let (_, attempts) = finished(&api, &job, "FAILED").await;
    let error = attempts[0]["error"]["message"].as_str().unwrap();
    assert!(error.contains("an internal address not granted by address"), "{error}");
    let entries: Vec<(String, Vec<(String, String)>)> =
        redis::cmd("XRANGE").arg(&stream).arg("-").arg("+").query_async(&mut con).await.unwrap();
    assert_eq!(entries.len(), 1, "a refused plugin appended");
    let _: () = redis::cmd("DEL").arg(&stream).query_async(&mut con).await.unwrap();
}
