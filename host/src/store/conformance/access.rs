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
