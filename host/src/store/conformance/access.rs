//! Tenants and the keys issued to them: the default tenant every database has, a key's record
//! without its hash, revocation kept, and the active keys authentication reloads.

use super::*;
use crate::domain::KeyRole;
use crate::ids::ApiKeyId;

pub async fn issued_keys_are_kept_listed_and_revoked(store: Arc<dyn Store>) {
    let tenant = store.tenant_get(DEFAULT_TENANT).await.unwrap().expect("every database has the default tenant");
    assert_eq!(tenant.name, "default");
    assert!(store.tenant_get("acme").await.unwrap().is_none());
    let page = PageRequest { limit: 10, after: None, newest_first: false };
    assert_eq!(store.tenant_list(&page).await.unwrap().len(), 1);

    let (first, second) = (ApiKeyId::new(), ApiKeyId::new());
    for (id, role, hash) in [(&first, KeyRole::Read, [1u8; 32]), (&second, KeyRole::Admin, [2u8; 32])] {
        let write = TenantKeyWrite { key_id: id, tenant: "default", role, label: Some("ci"), key_hash: &hash };
        let made = store.tenant_key_insert(&write).await.unwrap();
        assert_eq!((made.key_id, made.role, made.label.as_deref()), (id.clone(), role, Some("ci")));
        assert!(made.revoked_at.is_none());
    }
    let duplicate = TenantKeyWrite {
        key_id: &ApiKeyId::new(),
        tenant: "default",
        role: KeyRole::Read,
        label: None,
        key_hash: &[1u8; 32],
    };
    assert!(store.tenant_key_insert(&duplicate).await.is_err(), "a key's hash is unique");
    let listed = store.tenant_key_list("default", &page).await.unwrap();
    assert_eq!(listed.iter().map(|k| k.key_id.clone()).collect::<Vec<_>>(), [first.clone(), second.clone()]);
    assert!(store.tenant_key_list("acme", &page).await.unwrap().is_empty());
    assert!(store.tenant_key_get("acme", &first).await.unwrap().is_none(), "another tenant's key is not found");

    let mut active = store.tenant_keys_active().await.unwrap();
    active.sort_by(|a, b| a.key_id.cmp(&b.key_id));
    assert_eq!(
        active.iter().map(|k| (k.key_hash.clone(), k.role)).collect::<Vec<_>>(),
        [(vec![1u8; 32], KeyRole::Read), (vec![2u8; 32], KeyRole::Admin)]
    );

    let revoked = store.tenant_key_revoke("default", &first).await.unwrap().expect("revoked");
    let at = revoked.revoked_at.expect("revoked_at set");
    let again = store.tenant_key_revoke("default", &first).await.unwrap().unwrap();
    assert_eq!(again.revoked_at, Some(at), "revoking again keeps the first time");
    assert!(store.tenant_key_revoke("acme", &second).await.unwrap().is_none());
    assert!(store.tenant_key_revoke("default", &ApiKeyId::new()).await.unwrap().is_none());
    let active: Vec<ApiKeyId> = store.tenant_keys_active().await.unwrap().into_iter().map(|k| k.key_id).collect();
    assert_eq!(active, std::slice::from_ref(&second));
    assert_eq!(store.tenant_key_get("default", &first).await.unwrap().unwrap().revoked_at, Some(at));
}

pub async fn audit_records_are_listed_by_tenant_and_purged_by_age(store: Arc<dyn Store>) {
    use crate::ids::AuditId;
    let record = |tenant: &str, path: &str, at: DateTime<Utc>, role: Option<KeyRole>| AuditRecord {
        audit_id: AuditId::new(),
        tenant: tenant.to_owned(),
        key_id: role.map(|_| ApiKeyId::new()),
        role,
        method: "POST".to_owned(),
        route: "/configs".to_owned(),
        path: path.to_owned(),
        status: 201,
        request_id: "req_1".to_owned(),
        at,
    };
    let old = now() - chrono::Duration::days(40);
    let records: Vec<AuditRecord> = (0..250)
        .map(|i| record("default", &format!("/old/{i}"), old + chrono::Duration::milliseconds(i), Some(KeyRole::Write)))
        .chain([record("default", "/new", now(), None), record("acme", "/theirs", now(), Some(KeyRole::Admin))])
        .collect();
    store.audit_insert_many(&records).await.unwrap();
    let page = PageRequest { limit: 300, after: None, newest_first: false };
    let listed = store.audit_list("default", &page).await.unwrap();
    assert_eq!(listed.len(), 251);
    assert_eq!(listed[0], records[0], "a record reads back as written");
    assert_eq!(listed[250].path, "/new");
    assert!(listed[250].key_id.is_none() && listed[250].role.is_none());
    let newest = store.audit_list("default", &PageRequest { newest_first: true, limit: 1, after: None }).await.unwrap();
    assert_eq!(newest[0].path, "/new");
    assert_eq!(store.audit_list("acme", &page).await.unwrap().len(), 1);

    let cutoff = now() - chrono::Duration::days(30);
    assert_eq!(store.audit_purge(cutoff, 200).await.unwrap(), 200, "a batch at most");
    assert_eq!(store.audit_purge(cutoff, 200).await.unwrap(), 50);
    assert_eq!(store.audit_purge(cutoff, 200).await.unwrap(), 0);
    let kept: Vec<String> = store.audit_list("default", &page).await.unwrap().into_iter().map(|r| r.path).collect();
    assert_eq!(kept, ["/new"]);
}

/// A tenant's resources are stored under qualified names (`domain::tenant`): one name in two
/// tenants is two rows, each found by its own tenant's name alone, and every list of a tenant
/// holds its rows and no other's.
pub async fn each_tenant_reads_its_own_resources_and_no_other_s(store: Arc<dyn Store>) {
    use crate::domain::Scope;
    use serde_json::json;

    let (default, acme) = (Scope::default(), Scope::new("acme"));
    let page = PageRequest { limit: 10, after: None, newest_first: false };
    for (scope, value) in [(&default, 1), (&acme, 2)] {
        let name = scope.stored("orders");
        store.payload_spec_insert(&name, &json!({"const": value})).await.unwrap();
        store.config_insert(&name, &json!({"v": value})).await.unwrap();
        store.secret_insert(&scope.stored("token"), &[value as u8], None).await.unwrap();
        let mut write = endpoint_write(&name, None);
        write.config = Some(name.to_string());
        write.secret_refs = vec![scope.stored("token").into_owned()];
        store.endpoint_insert(&write).await.unwrap();
    }
    for (scope, value) in [(&default, 1), (&acme, 2)] {
        let tenant = scope.tenant();
        let config = store.config_get(&scope.stored("orders")).await.unwrap().unwrap();
        assert_eq!(config.values["v"], value, "{tenant}");
        let configs = store.config_list(tenant, &page).await.unwrap();
        assert_eq!(configs.iter().map(|c| c.values["v"].clone()).collect::<Vec<_>>(), [json!(value)], "{tenant}");
        let specs = store.payload_spec_list(tenant, &page).await.unwrap();
        assert_eq!(specs.iter().map(|s| s.schema["const"].clone()).collect::<Vec<_>>(), [json!(value)], "{tenant}");
        let secrets = store.secret_list(tenant, &page).await.unwrap();
        assert_eq!(secrets.iter().map(|s| s.encrypted_value.clone()).collect::<Vec<_>>(), [vec![value as u8]]);
        let endpoints = store.endpoint_list(tenant, &page).await.unwrap();
        assert_eq!(endpoints.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), [scope.stored("orders")]);
        assert_eq!(endpoints[0].config.as_deref(), Some(&*scope.stored("orders")), "its own tenant's config");
    }
    assert!(store.config_list("beta", &page).await.unwrap().is_empty(), "a tenant with nothing lists nothing");

    // Jobs and executions are their endpoint's tenant's: lists, counts, the overview's
    // activity and upcoming ticks of one tenant hold its own alone.
    let at = now() - chrono::Duration::seconds(1);
    let mut executions = Vec::new();
    for scope in [&default, &acme] {
        let j = job(&scope.stored("orders"), Trigger::Immediate, Some("k"), at);
        let e = execution(&j, ExecutionStatus::Queued, at);
        store.job_insert(&j, Some(&e)).await.unwrap();
        executions.push(e.execution_id);
        let mut cron = job(&scope.stored("orders"), Trigger::Cron, None, at);
        cron.cron_expression = Some("* * * * *".into());
        cron.cron_timezone = Some("UTC".into());
        cron.cron_next_run_at = Some(at + chrono::Duration::minutes(1));
        store.job_insert(&cron, None).await.unwrap();
    }
    for (scope, own) in [(&default, &executions[0]), (&acme, &executions[1])] {
        let tenant = scope.tenant();
        let filter = JobFilter { tenant: Some(tenant.to_owned()), ..JobFilter::default() };
        let jobs = store.job_list(&filter, &page).await.unwrap();
        assert_eq!(jobs.len(), 2, "{tenant}: {jobs:?}");
        assert!(jobs.iter().all(|j| scope.owns(&j.endpoint)), "{tenant}");
        let filter = ExecutionFilter { tenant: Some(tenant.to_owned()), ..ExecutionFilter::default() };
        let found = store.execution_search(&filter, &page).await.unwrap();
        assert_eq!(found.iter().map(|e| &e.execution_id).collect::<Vec<_>>(), [own], "{tenant}");
        assert_eq!(store.execution_counts(Some(tenant)).await.unwrap(), [(ExecutionStatus::Queued, 1)], "{tenant}");
        let activity = store.execution_activity(at - chrono::Duration::seconds(1), 10, Some(tenant)).await.unwrap();
        assert_eq!(activity.iter().map(|a| a.endpoint.as_str()).collect::<Vec<_>>(), [scope.stored("orders")]);
        let upcoming = store.cron_upcoming(10, Some(tenant)).await.unwrap();
        assert_eq!(upcoming.iter().map(|j| j.endpoint.as_str()).collect::<Vec<_>>(), [scope.stored("orders")]);
    }
    let filter = JobFilter { tenant: Some("beta".into()), ..JobFilter::default() };
    assert!(store.job_list(&filter, &page).await.unwrap().is_empty());
    assert_eq!(store.execution_counts(None).await.unwrap(), [(ExecutionStatus::Queued, 2)], "every tenant's");
    assert_eq!(store.cron_upcoming(10, None).await.unwrap().len(), 2);
    for id in &executions {
        store.execution_cancel(id).await.unwrap();
    }
    for job in store.job_list(&JobFilter::default(), &page).await.unwrap() {
        store.job_retire(&job.job_id).await.unwrap();
        store.job_delete(&job.job_id).await.unwrap();
    }
    // A document in use by its tenant's endpoint is refused deletion; the other tenant's
    // same-named document is not what is in use.
    assert_eq!(store.config_delete(&acme.stored("orders")).await.unwrap(), Deleted::InUse(vec!["acme/orders".into()]));
    store.endpoint_delete("orders").await.unwrap();
    assert_eq!(store.config_delete("orders").await.unwrap(), Deleted::Deleted);
    assert_eq!(store.config_get("acme/orders").await.unwrap().unwrap().values["v"], 2, "acme's is untouched");
}

/// A database written before tenants (PostgreSQL 0078, SQLite 0074) migrates on start into the
/// `default` tenant with nothing lost: every resource, job and execution, whatever its status,
/// is the default tenant's and no other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_tenants_is_all_the_default_tenant_s() {
    use serde_json::json;
    for (store, _guard) in new_stores(Some((78, 74))).await {
        let backend = store.backend();
        store.payload_spec_insert("orders", &json!({"type": "object"})).await.unwrap();
        store.config_insert("orders", &json!({"v": 1})).await.unwrap();
        store.secret_insert("token", &[1], None).await.unwrap();
        let mut write = endpoint_write("orders", None);
        write.config = Some("orders".into());
        store.endpoint_insert(&write).await.unwrap();
        queued(&*store, "orders", 4).await;
        let held = store.execution_claim(&claim("w", 3, Duration::from_secs(60))).await.unwrap();
        let finishes = [finish(&held[0], ExecutionStatus::Success), finish(&held[1], ExecutionStatus::Failed)];
        store.execution_finish_many(&finishes).await.unwrap();

        store.migrate().await.unwrap();
        let page = PageRequest { limit: 10, after: None, newest_first: false };
        let tenant = Some(DEFAULT_TENANT.to_owned());
        assert_eq!(store.payload_spec_list(DEFAULT_TENANT, &page).await.unwrap().len(), 1, "{backend:?}");
        assert_eq!(store.config_list(DEFAULT_TENANT, &page).await.unwrap().len(), 1, "{backend:?}");
        assert_eq!(store.secret_list(DEFAULT_TENANT, &page).await.unwrap().len(), 1, "{backend:?}");
        assert_eq!(store.endpoint_list(DEFAULT_TENANT, &page).await.unwrap().len(), 1, "{backend:?}");
        let jobs = JobFilter { tenant: tenant.clone(), ..JobFilter::default() };
        assert_eq!(store.job_list(&jobs, &page).await.unwrap().len(), 4, "{backend:?}");
        let executions = ExecutionFilter { tenant, ..ExecutionFilter::default() };
        let mut statuses: Vec<&str> =
            store.execution_search(&executions, &page).await.unwrap().iter().map(|e| e.status.as_str()).collect();
        statuses.sort_unstable();
        assert_eq!(statuses, ["FAILED", "QUEUED", "RUNNING", "SUCCESS"], "{backend:?}");
        let mut counts = store.execution_counts(Some(DEFAULT_TENANT)).await.unwrap();
        counts.sort_by_key(|(status, _)| status.as_str());
        assert_eq!(counts, [(ExecutionStatus::Queued, 1), (ExecutionStatus::Running, 1)], "{backend:?}");
        assert!(store.config_list("acme", &page).await.unwrap().is_empty(), "{backend:?}");
        let acme = JobFilter { tenant: Some("acme".into()), ..JobFilter::default() };
        assert!(store.job_list(&acme, &page).await.unwrap().is_empty(), "{backend:?}");
    }
}
