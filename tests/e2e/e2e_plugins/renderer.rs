//! Renderer plugins: a plugin renders an endpoint's spec in place of the built-in renderer.

use super::*;

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
