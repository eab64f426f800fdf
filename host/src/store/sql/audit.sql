-- The audit trail (migration 0071 on PostgreSQL, 0068 on SQLite). Indexes: the primary key
-- (audit_id), idx_audit_records_by_tenant (tenant, at, audit_id) for a tenant's pages, and
-- idx_audit_records_at (at) for the purge. A batch of records is written by each backend its
-- own way (postgres.sql: one UNNEST; sqlite.rs: rows of one INSERT).

-- The records older than $1, oldest first, at most $2 of them.
-- name: AuditPurge
DELETE FROM audit_records WHERE audit_id IN (SELECT audit_id FROM audit_records WHERE at < $1 ORDER BY at LIMIT $2);
