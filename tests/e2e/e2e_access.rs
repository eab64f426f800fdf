//! Who may call the API: operator keys, and keys issued to a tenant with a role (`admin`,
//! `write`, `read`), made, listed and revoked through `/tenants/{tenant}/api-keys` and the CLI
//! (which makes tenants too: `taskexec tenants create`); and the audit trail of what they asked
//! for (`GET /audit`).

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::server::{command, API_KEY};
use crate::support::{eventually, Backend, Client, Server, ServerOptions, TestDb};

both_backends!(
    issued_keys_do_what_their_role_allows_and_no_more,
    a_revoked_key_is_refused_by_every_process_within_a_second,
    the_cli_issues_lists_and_revokes_keys,
    every_change_asked_for_leaves_an_audit_record_its_tenants_admin_can_read,
);

/// Issue a `role` key to the default tenant with the operator's client; (key_id, key).
async fn issue(operator: &Client, role: &str) -> (String, String) {
    let made = operator.post("/tenants/default/api-keys", &json!({"role": role, "label": format!("{role} key")})).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.body["role"], role);
    assert_eq!(made.body["tenant"], "default");
    assert!(made.body["revoked_at"].is_null());
    let key = made.body["key"].as_str().expect("the key, shown once").to_owned();
    assert!(key.starts_with("te_") && key.len() > 40, "{key}");
    (made.body["key_id"].as_str().unwrap().to_owned(), key)
}

async fn issued_keys_do_what_their_role_allows_and_no_more(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let operator = server.client();
    let (read_id, read_key) = issue(&operator, "read").await;
    let (_, write_key) = issue(&operator, "write").await;
    let (admin_id, admin_key) = issue(&operator, "admin").await;
    let (read, write, admin) =
        (operator.with_key(Some(&read_key)), operator.with_key(Some(&write_key)), operator.with_key(Some(&admin_key)));
    let config = json!({"name": "shared", "values": {"a": 1}});

    // read: GET alone, every other method refused naming the role, before anything is done.
    assert_eq!(read.get("/configs").await.status, 200);
    assert_eq!(read.get("/tenants/default").await.body["name"], "default");
    let message = read.post("/configs", &config).await.error(403, "FORBIDDEN");
    assert!(message.contains("role `read`") && message.contains("GET"), "{message}");
    read.delete("/configs/shared").await.error(403, "FORBIDDEN");
    assert_eq!(operator.get("/configs/shared").await.status, 404, "the refused create made nothing");

    // write: everything but keys and the operator's routes.
    assert_eq!(write.post("/configs", &config).await.status, 201);
    assert_eq!(read.get("/configs/shared").await.body["values"]["a"], 1, "one tenant, one set of resources");
    let message = write.post("/tenants/default/api-keys", &json!({"role": "read"})).await.error(403, "FORBIDDEN");
    assert!(message.contains("role `write`") && message.contains("admin"), "{message}");
    write.get("/tenants/default/api-keys").await.error(403, "FORBIDDEN");
    write.delete(&format!("/tenants/default/api-keys/{read_id}")).await.error(403, "FORBIDDEN");
    let message = write.get("/tenants").await.error(403, "FORBIDDEN");
    assert!(message.contains("operator"), "{message}");
    assert_eq!(write.delete("/configs/shared").await.status, 204);

    // admin: its tenant's keys too, and never a key's text after it was made.
    let (made_id, made_key) = issue(&admin, "read").await;
    let (listed, _) = admin.list_all("/tenants/default/api-keys", 2).await;
    let ids: Vec<&str> = listed.iter().map(|k| k["key_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 4, "{listed:?}");
    assert!(ids.contains(&made_id.as_str()) && ids.contains(&admin_id.as_str()));
    let one = admin.get(&format!("/tenants/default/api-keys/{made_id}")).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.body["label"], "read key");
    for shown in listed.iter().chain([&one.body]) {
        assert!(shown.get("key").is_none() && shown.get("key_hash").is_none(), "{shown}");
    }
    for key in [&read_key, &write_key, &admin_key, &made_key] {
        assert!(!one.text.contains(key.as_str()) && !server.output_text().contains(key.as_str()), "a key was shown");
    }
    admin.get("/tenants").await.error(403, "FORBIDDEN");

    // Another tenant, and a key another tenant's would have, are as if they did not exist.
    admin.get("/tenants/acme").await.error(404, "TENANT_NOT_FOUND");
    admin.post("/tenants/acme/api-keys", &json!({"role": "read"})).await.error(404, "TENANT_NOT_FOUND");
    operator.get("/tenants/acme/api-keys").await.error(404, "TENANT_NOT_FOUND");
    admin.get("/tenants/default/api-keys/key_0123").await.error(404, "API_KEY_NOT_FOUND");
    admin.delete("/tenants/default/api-keys/key_0123").await.error(404, "API_KEY_NOT_FOUND");
    let (tenants, _) = operator.list_all("/tenants", 10).await;
    assert_eq!(tenants.iter().map(|t| t["name"].clone()).collect::<Vec<Value>>(), vec![json!("default")]);

    // Bad bodies name the field.
    for (body, field) in [
        (json!({"role": "owner"}), "role"),
        (json!({}), "role"),
        (json!({"role": "read", "label": "x".repeat(201)}), "label"),
        (json!({"role": "read", "label": "line\nbreak"}), "label"),
        (json!({"role": "read", "scopes": ["all"]}), "scopes"),
    ] {
        let message = admin.post("/tenants/default/api-keys", &body).await.error(400, "INVALID_REQUEST");
        assert!(message.contains(field), "{body}: {message}");
    }

    // Revoking: at once on this process; again is no error; the record keeps when.
    assert_eq!(admin.delete(&format!("/tenants/default/api-keys/{made_id}")).await.status, 204);
    operator.with_key(Some(&made_key)).get("/configs").await.error(401, "UNAUTHORIZED");
    assert_eq!(admin.delete(&format!("/tenants/default/api-keys/{made_id}")).await.status, 204);
    let revoked = admin.get(&format!("/tenants/default/api-keys/{made_id}")).await;
    assert!(revoked.body["revoked_at"].is_string(), "{}", revoked.text);
    // An admin may revoke itself; it is then refused like any revoked key.
    assert_eq!(admin.delete(&format!("/tenants/default/api-keys/{admin_id}")).await.status, 204);
    admin.get("/configs").await.error(401, "UNAUTHORIZED");
    assert_eq!(read.get("/configs").await.status, 200, "other keys are untouched");
}

/// Two API processes on one database: a key made through one is accepted by the other within
/// the reload period, and once revoked through one, the other refuses it within a second; a
/// process started afterwards never accepts it.
async fn a_revoked_key_is_refused_by_every_process_within_a_second(backend: Backend) {
    let db = TestDb::new(backend).await;
    let api = || ServerOptions::new().env("TE_ROLES", "api");
    let (first, second) = (Server::start_with(&db, api()).await, Server::start_with(&db, api()).await);
    let (key_id, key) = issue(&first.client(), "write").await;
    let on_second = second.client().with_key(Some(&key));
    eventually("the second process accepts the new key", Duration::from_secs(1), || async {
        on_second.get("/configs").await.status == 200
    })
    .await;

    assert_eq!(first.client().delete(&format!("/tenants/default/api-keys/{key_id}")).await.status, 204);
    first.client().with_key(Some(&key)).get("/configs").await.error(401, "UNAUTHORIZED");
    eventually("the second process refuses the revoked key", Duration::from_secs(1), || async {
        on_second.get("/configs").await.status == 401
    })
    .await;

    // A process started later holds the keys not revoked from its first request on.
    let (_, kept) = issue(&first.client(), "read").await;
    let third = Server::start_with(&db, api()).await;
    third.client().with_key(Some(&key)).get("/configs").await.error(401, "UNAUTHORIZED");
    assert_eq!(third.client().with_key(Some(&kept)).send(Method::GET, "/tenants/default", None).await.status, 200);
}

async fn the_cli_issues_lists_and_revokes_keys(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let run = |args: &[&str]| {
        let out = command(args, &env, db.dir.path()).output().unwrap();
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(out.status.success(), "taskexec {args:?} failed:\n{stdout}{stderr}");
        (stdout, stderr)
    };

    let (key, said) = run(&["api-keys", "create", "--role", "read", "--label", "grafana"]);
    let key = key.trim().to_owned();
    assert!(key.starts_with("te_") && !key.contains(' '), "the key alone on standard output: {key:?}");
    assert!(said.contains("Issued read key key_") && said.contains("tenant default"), "{said}");
    assert_eq!(server.client().with_key(Some(&key)).get("/endpoints").await.status, 200);

    let (table, _) = run(&["api-keys", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("KEY") && lines[0].contains("ROLE") && lines[0].contains("LABEL"), "{table}");
    assert!(lines[1].contains("read") && lines[1].contains("grafana") && !table.contains(&key), "{table}");
    let key_id = lines[1].split_whitespace().next().unwrap().to_owned();
    let (record, _) = run(&["api-keys", "get", &key_id]);
    assert_eq!(serde_json::from_str::<Value>(&record).unwrap()["label"], "grafana");
    let (made, _) = run(&["tenants", "create", "acme"]);
    assert!(made.starts_with("Made tenant acme"), "{made}");
    let (again, _) = run(&["tenants", "create", "acme"]);
    assert!(again.starts_with("Already had tenant acme"), "{again}");
    let (tenants, _) = run(&["tenants", "list"]);
    let names: Vec<&str> = tenants.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["default", "acme"], "{tenants}");
    let (acme_key, _) = run(&["api-keys", "create", "--tenant", "acme", "--role", "write"]);
    let acme = server.client().with_key(Some(acme_key.trim()));
    assert_eq!(acme.post("/configs", &json!({"name": "c", "values": {}})).await.status, 201);
    server.client().get("/configs/c").await.error(404, "CONFIG_NOT_FOUND");
    // The operator's key, within acme.
    let mut within = env.clone();
    within.push(("TE_WITHIN_TENANT".to_owned(), "acme".to_owned()));
    let out = command(&["configs", "get", "c"], &within, db.dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["name"], "c");

    let (revoked, _) = run(&["api-keys", "revoke", &key_id]);
    assert!(revoked.starts_with(&format!("Revoked API key {key_id}")), "{revoked}");
    server.client().with_key(Some(&key)).get("/endpoints").await.error(401, "UNAUTHORIZED");
    let out = command(&["api-keys", "create", "--role", "owner"], &env, db.dir.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("owner"), "names the bad role");
}

/// Every request that could change something leaves a record (refusals too), reads leave
/// none, and a record holds the route and path but never a body.
async fn every_change_asked_for_leaves_an_audit_record_its_tenants_admin_can_read(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let operator = server.client();
    let (admin_id, admin_key) = issue(&operator, "admin").await;
    let (write_id, write_key) = issue(&operator, "write").await;
    let (_, read_key) = issue(&operator, "read").await;
    let (admin, write, read) =
        (operator.with_key(Some(&admin_key)), operator.with_key(Some(&write_key)), operator.with_key(Some(&read_key)));

    assert_eq!(write.post("/secrets", &json!({"name": "token", "value": "s3cret-in-a-body"})).await.status, 201);
    assert_eq!(write.get("/secrets/token").await.status, 200);
    read.post("/configs", &json!({"name": "c", "values": {}})).await.error(403, "FORBIDDEN");
    assert_eq!(admin.delete("/secrets/token").await.status, 204);

    // Three keys issued, then the three requests above that could change something.
    let expected = [
        (None, "operator", "POST", "/tenants/{tenant}/api-keys", "/tenants/default/api-keys", 201),
        (None, "operator", "POST", "/tenants/{tenant}/api-keys", "/tenants/default/api-keys", 201),
        (None, "operator", "POST", "/tenants/{tenant}/api-keys", "/tenants/default/api-keys", 201),
        (Some(write_id.as_str()), "write", "POST", "/secrets", "/secrets", 201),
        (None, "read", "POST", "/configs", "/configs", 403),
        (Some(admin_id.as_str()), "admin", "DELETE", "/secrets/{name}", "/secrets/token", 204),
    ];
    eventually("the audit records are written", Duration::from_secs(5), || async {
        admin.list_all("/audit", 4).await.0.len() >= expected.len()
    })
    .await;
    let records = admin.list_all("/audit", 4).await.0;
    assert_eq!(records.len(), expected.len(), "reads leave no record: {records:?}");
    for (record, (key_id, role, method, route, path, status)) in records.iter().zip(&expected) {
        if let Some(key_id) = key_id {
            assert_eq!(record["key_id"], *key_id, "{record}");
        }
        assert_eq!(
            (&record["role"], &record["method"], &record["route"], &record["path"], &record["status"]),
            (&json!(role), &json!(method), &json!(route), &json!(path), &json!(status)),
            "{record}"
        );
        assert_eq!(record["tenant"], "default");
        assert!(record["audit_id"].as_str().unwrap().starts_with("aud_") && record["at"].is_string());
        assert!(record["request_id"].as_str().unwrap().starts_with("req_"), "{record}");
    }
    let newest = admin.get("/audit?order=newest&limit=1").await;
    assert_eq!(newest.body["items"][0]["path"], "/secrets/token", "{}", newest.text);
    let everything = admin.get("/audit?limit=200").await.text;
    assert!(!everything.contains("s3cret-in-a-body") && !everything.contains(&write_key), "{everything}");
    assert_eq!(operator.get("/audit?tenant=default").await.body["items"].as_array().unwrap().len(), 6);

    // Only an admin key or an operator key reads it; another tenant's is not there.
    for key in [&write, &read] {
        let message = key.get("/audit").await.error(403, "FORBIDDEN");
        assert!(message.contains("admin"), "{message}");
    }
    admin.get("/audit?tenant=acme").await.error(404, "TENANT_NOT_FOUND");
    operator.get("/audit?tenant=acme").await.error(404, "TENANT_NOT_FOUND");
    admin.get("/audit?order=sideways").await.error(400, "INVALID_REQUEST");
}
