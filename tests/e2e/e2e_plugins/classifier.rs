//! Classifier plugins: a plugin judges the receiver's answer in place of the transport.

use super::*;

both_backends!(a_classifier_overrules_the_transport_on_the_answers_body);

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
