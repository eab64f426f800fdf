//! The audit trail: who asked for what change, and what they were answered. Records are
//! written in batches (`api::audit` gathers them) and read a tenant's page at a time. The
//! statements are in `sql/audit.sql`; a batch's insert is each backend's own
//! (`SqlBackend::audit_write`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::pages::{self, List};
use super::sql::statements::audit as sql;
use super::sql::{query, SqlBackend};
use super::{DbTime, PageRequest, StoreResult};
use crate::domain::KeyRole;
use crate::ids::{ApiKeyId, AuditId};

/// One request's record, as written and as read.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRecord {
    pub audit_id: AuditId,
    pub tenant: String,
    /// The key issued to the tenant that made the request; None for an operator key.
    pub key_id: Option<ApiKeyId>,
    /// Its role; None for an operator key.
    pub role: Option<KeyRole>,
    pub method: String,
    /// The route's pattern (`/jobs/{id}/pause`).
    pub route: String,
    /// The path asked.
    pub path: String,
    /// The answer's HTTP status.
    pub status: i32,
    pub request_id: String,
    pub at: DateTime<Utc>,
}

#[async_trait]
pub trait Audit: Send + Sync {
    /// Write a batch of records in one statement (or transaction).
    async fn audit_insert_many(&self, records: &[AuditRecord]) -> StoreResult<()>;
    /// A tenant's records, oldest first (or newest, as the page asks).
    async fn audit_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<AuditRecord>>;
    /// Delete at most `limit` records older than `before`, oldest first; how many went.
    async fn audit_purge(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
}

#[async_trait]
impl<S: SqlBackend> Audit for S {
    async fn audit_insert_many(&self, records: &[AuditRecord]) -> StoreResult<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.audit_write(records).await
    }

    async fn audit_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<AuditRecord>> {
        let list = List {
            columns: "audit_id, tenant, key_id, role, method, route, path, status, request_id, at",
            from: "audit_records",
            time_column: "at",
            key: "audit_id",
            written: None,
            filters: &[("tenant", tenant)],
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn audit_purge(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        query(sql::AUDIT_PURGE).bind(DbTime(before)).bind(limit).execute(self.db()).await
    }
}
