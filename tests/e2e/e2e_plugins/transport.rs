//! Transport plugins: signed webhooks verified at the receiver, hostile plugins failing only
//! their own attempts, the host's HTTP, Kafka and Redis clients under the grants, and the
//! instance pool and reuse.

use super::*;

both_backends!(instances_are_reused_only_within_one_endpoint_version);

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
