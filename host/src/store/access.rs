//! Who may call the API: the keys the service generated for itself, the tenants and the keys
//! issued to them with a role, and the dashboard's sessions. The statements are in
//! `sql/access.sql`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::pages::{self, List};
use super::sql::statements::access as sql;
use super::sql::{query, Arg, SqlBackend};
use super::{now, DbTime, Inserted, PageRequest, StoreResult};
use crate::domain::KeyRole;
use crate::ids::ApiKeyId;

/// A tenant: a team whose keys see its own resources. Every deployment has `default`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Tenant {
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Its own quotas (None: none of its own; each limit it does not set is the default's).
    #[sqlx(json(nullable))]
    pub quotas: Option<crate::domain::quotas::Quotas>,
}

pub use crate::domain::DEFAULT_TENANT;

/// An API key issued to a tenant, as listed: never the key, never its hash.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TenantKey {
    pub key_id: ApiKeyId,
    pub tenant: String,
    pub role: KeyRole,
    /// What the key is for, in its maker's words.
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key that is not revoked, as the API's authentication holds it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActiveKey {
    pub key_hash: Vec<u8>,
    pub key_id: ApiKeyId,
    pub tenant: String,
    pub role: KeyRole,
}

/// A new key's row: its id, tenant, role, label and the SHA-256 of its text.
pub struct TenantKeyWrite<'a> {
    pub key_id: &'a ApiKeyId,
    pub tenant: &'a str,
    pub role: KeyRole,
    pub label: Option<&'a str>,
    pub key_hash: &'a [u8],
}

/// API keys' and dashboard sessions' part of the store.
#[async_trait]
pub trait Access: Send + Sync {
    /// SHA-256 hashes of the API keys the service generated for itself.
    async fn api_key_hashes(&self) -> StoreResult<Vec<Vec<u8>>>;
    async fn api_key_insert(&self, key_hash: &[u8]) -> StoreResult<()>;
    /// Keep a dashboard session: the SHA-256 of its token, the hash of the key that signed in,
    /// and when it ends. Sessions that have ended are deleted on the way.
    async fn dashboard_session_insert(
        &self,
        token_hash: &[u8],
        key_hash: &[u8],
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// The hash of the key a session signed in with, while the session has not ended.
    async fn dashboard_session_key(&self, token_hash: &[u8]) -> StoreResult<Option<Vec<u8>>>;
    /// End a session (signing out).
    async fn dashboard_session_delete(&self, token_hash: &[u8]) -> StoreResult<()>;

    /// Make a tenant; the existing one when the name is taken.
    async fn tenant_insert(&self, name: &str) -> StoreResult<Inserted<Tenant>>;
    async fn tenant_get(&self, name: &str) -> StoreResult<Option<Tenant>>;
    async fn tenant_list(&self, page: &PageRequest) -> StoreResult<Vec<Tenant>>;
    /// Replace a tenant's own quotas; None if it does not exist.
    async fn tenant_quotas_set(
        &self,
        name: &str,
        quotas: &crate::domain::quotas::Quotas,
    ) -> StoreResult<Option<Tenant>>;
    /// Every tenant that has quotas of its own.
    async fn tenants_with_quotas(&self) -> StoreResult<Vec<Tenant>>;
    /// Delete a tenant's keys (the ids deleted): its first step out.
    async fn tenant_keys_delete(&self, tenant: &str) -> StoreResult<Vec<ApiKeyId>>;
    /// Delete a tenant (its resources deleted before); whether it was there.
    async fn tenant_delete(&self, name: &str) -> StoreResult<bool>;
    async fn tenant_key_insert(&self, key: &TenantKeyWrite<'_>) -> StoreResult<TenantKey>;
    async fn tenant_key_get(&self, tenant: &str, key_id: &ApiKeyId) -> StoreResult<Option<TenantKey>>;
    /// A tenant's keys, revoked ones included, oldest first.
    async fn tenant_key_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<TenantKey>>;
    /// Revoke a key (again is a no-op that keeps the first time); None if the tenant has no
    /// such key.
    async fn tenant_key_revoke(&self, tenant: &str, key_id: &ApiKeyId) -> StoreResult<Option<TenantKey>>;
    /// Every key not revoked, of every tenant.
    async fn tenant_keys_active(&self) -> StoreResult<Vec<ActiveKey>>;
}

#[async_trait]
impl<S: SqlBackend> Access for S {
    async fn api_key_hashes(&self) -> StoreResult<Vec<Vec<u8>>> {
        let rows: Vec<(Vec<u8>,)> = query(sql::API_KEY_HASHES).fetch_all(self.db()).await?;
        Ok(rows.into_iter().map(|(hash,)| hash).collect())
    }

    async fn api_key_insert(&self, key_hash: &[u8]) -> StoreResult<()> {
        query(sql::API_KEY_INSERT).bind(key_hash).bind(DbTime(now())).execute(self.db()).await?;
        Ok(())
    }

    async fn dashboard_session_insert(
        &self,
        token_hash: &[u8],
        key_hash: &[u8],
        expires_at: DateTime<Utc>,
    ) -> StoreResult<()> {
        let at = now();
        query(sql::DASHBOARD_SESSIONS_ENDED_DELETE).bind(DbTime(at)).execute(self.db()).await?;
        query(sql::DASHBOARD_SESSION_INSERT)
            .bind(token_hash)
            .bind(key_hash)
            .bind(DbTime(at))
            .bind(DbTime(expires_at))
            .execute(self.db())
            .await?;
        Ok(())
    }

    async fn dashboard_session_key(&self, token_hash: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        let row: Option<(Vec<u8>,)> =
            query(sql::DASHBOARD_SESSION_KEY).bind(token_hash).bind(DbTime(now())).fetch_optional(self.db()).await?;
        Ok(row.map(|(hash,)| hash))
    }

    async fn dashboard_session_delete(&self, token_hash: &[u8]) -> StoreResult<()> {
        query(sql::DASHBOARD_SESSION_DELETE).bind(token_hash).execute(self.db()).await?;
        Ok(())
    }

    async fn tenant_insert(&self, name: &str) -> StoreResult<Inserted<Tenant>> {
        match query(sql::TENANT_INSERT).bind(name).bind(DbTime(now())).fetch_optional(self.db()).await? {
            Some(made) => Ok(Inserted::Created(made)),
            None => Inserted::existing(self.tenant_get(name).await?),
        }
    }

    async fn tenant_get(&self, name: &str) -> StoreResult<Option<Tenant>> {
        query(sql::TENANT_GET).bind(name).fetch_optional(self.db()).await
    }

    async fn tenant_quotas_set(
        &self,
        name: &str,
        quotas: &crate::domain::quotas::Quotas,
    ) -> StoreResult<Option<Tenant>> {
        let quotas = serde_json::to_value(quotas).expect("quotas serialize");
        query(sql::TENANT_QUOTAS_SET).bind(name).bind(Arg::json(&quotas)).fetch_optional(self.db()).await
    }

    async fn tenants_with_quotas(&self) -> StoreResult<Vec<Tenant>> {
        query(sql::TENANTS_WITH_QUOTAS).fetch_all(self.db()).await
    }

    async fn tenant_keys_delete(&self, tenant: &str) -> StoreResult<Vec<ApiKeyId>> {
        let deleted: Vec<(ApiKeyId,)> = query(sql::TENANT_KEYS_DELETE).bind(tenant).fetch_all(self.db()).await?;
        Ok(deleted.into_iter().map(|(id,)| id).collect())
    }

    async fn tenant_delete(&self, name: &str) -> StoreResult<bool> {
        Ok(query(sql::TENANT_DELETE).bind(name).execute(self.db()).await? == 1)
    }

    async fn tenant_list(&self, page: &PageRequest) -> StoreResult<Vec<Tenant>> {
        let list = List {
            columns: "name, created_at, quotas",
            from: "tenants",
            time_column: "created_at",
            key: "name",
            written: None,
            filters: &[],
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn tenant_key_insert(&self, key: &TenantKeyWrite<'_>) -> StoreResult<TenantKey> {
        query(sql::TENANT_KEY_INSERT)
            .bind(key.key_id)
            .bind(key.tenant)
            .bind(key.role)
            .bind(key.label)
            .bind(key.key_hash)
            .bind(DbTime(now()))
            .fetch_one(self.db())
            .await
    }

    async fn tenant_key_get(&self, tenant: &str, key_id: &ApiKeyId) -> StoreResult<Option<TenantKey>> {
        query(sql::TENANT_KEY_GET).bind(tenant).bind(key_id).fetch_optional(self.db()).await
    }

    async fn tenant_key_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<TenantKey>> {
        let list = List {
            columns: "key_id, tenant, role, label, created_at, revoked_at",
            from: "tenant_keys",
            time_column: "created_at",
            key: "key_id",
            written: None,
            filters: &[("tenant", tenant)],
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn tenant_key_revoke(&self, tenant: &str, key_id: &ApiKeyId) -> StoreResult<Option<TenantKey>> {
        query(sql::TENANT_KEY_REVOKE).bind(tenant).bind(key_id).bind(DbTime(now())).fetch_optional(self.db()).await
    }

    async fn tenant_keys_active(&self) -> StoreResult<Vec<ActiveKey>> {
        query(sql::TENANT_KEYS_ACTIVE).fetch_all(self.db()).await
    }
}
