//! The plugin registry: installs checked and refused, versions pinned, rolled back and removed,
//! a new version applied from the next attempt (in this process and another), and an author's
//! path from `taskexec plugin new` to an installed plugin.

use super::*;

both_backends!(registry_installs_checks_and_refuses, versions_are_pinned_rolled_back_and_removed);

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

/// `plugin new --world renderer|classifier|schedule`: each scaffold is written on the SDK (no
/// bindings of its own), builds into a component of that world and nothing else, and runs as
/// its doc comment says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_world_scaffolds_on_the_sdk_builds_and_runs() {
    let work = tempfile::tempdir().unwrap();
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plugins/target");
    let mut built = Vec::new();
    for (name, world) in [("my-renderer", "renderer"), ("my-classifier", "classifier"), ("my-schedule", "schedule")] {
        let (ok, out, err) =
            offline(&["new", name, "--world", world, "--dir", work.path().to_str().unwrap()], work.path());
        assert!(ok && out.contains(&format!("({world} plugin)")), "{out}{err}");
        let lib = std::fs::read_to_string(work.path().join(name).join("src/lib.rs")).unwrap();
        assert!(
            lib.contains(&format!("use taskexec_plugin_sdk::{world}::{{export")) && !lib.contains("wit_bindgen"),
            "{lib}"
        );
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(work.path().join(name).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .unwrap();
        assert!(status.success(), "the {world} scaffold builds");
        let wasm = target.join(format!("wasm32-wasip2/release/{}.wasm", name.replace('-', "_")));
        // The world it claims, and no other: the SDK's bindings of the other worlds add no
        // export, and a scaffold with no network imports none.
        let (ok, out, err) = offline(&["check", wasm.to_str().unwrap()], work.path());
        assert!(ok && out.contains(&format!("a valid {world}-plugin component")), "{out}{err}");
        assert!(!out.contains("http"), "{world} imports no network: {out}");
        built.push(wasm);
    }
    let run = |wasm: &PathBuf, args: &[&str]| {
        let mut all = vec!["run", wasm.to_str().unwrap()];
        all.extend_from_slice(args);
        let (ok, out, err) = offline(&all, work.path());
        assert!(ok, "{out}{err}");
        out
    };

    let rendered = run(&built[0], &["--spec", r#"{"to": "$input.who", "n": 1}"#, "--input", r#"{"who": "ada"}"#]);
    assert_eq!(serde_json::from_str::<Value>(&rendered).unwrap(), json!({"to": "ada", "n": 1}), "{rendered}");
    let verdict = run(&built[1], &["--answer", r#"{"status": 200, "body": "{\"error\": \"busy\"}"}"#]);
    assert_eq!(
        serde_json::from_str::<Value>(&verdict).unwrap(),
        json!({"verdict": "retry", "message": "the body reports an error", "after_ms": 5000}),
        "{verdict}"
    );
    let kept = run(&built[1], &["--answer", r#"{"status": 200, "body": "{\"ok\": true}"}"#]);
    assert_eq!(serde_json::from_str::<Value>(&kept).unwrap(), json!({"verdict": "keep"}), "{kept}");
    let ticks = run(&built[2], &["--after", "2026-03-01T09:00:00", "--ticks", "2"]);
    assert_eq!(ticks.lines().collect::<Vec<_>>(), ["2026-03-01T12:00:00 Sun", "2026-04-01T12:00:00 Wed"], "{ticks}");
}
