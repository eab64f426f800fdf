//! Who may call the API: the keys the service generated for itself, and the dashboard's
//! sessions. The statements are in `sql/access.sql`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::statements::access as sql;
use super::sql::{query, SqlBackend};
use super::{now, DbTime, StoreResult};

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
}
