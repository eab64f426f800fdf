-- Who may call the API: the hashes of the API keys the service generated for itself, and the
-- dashboard's sign-in sessions (each by the SHA-256 of its token). Indexes: api_keys' primary
-- key; dashboard_sessions' primary key (token_hash).

-- name: ApiKeyHashes
SELECT key_hash FROM api_keys ORDER BY created_at;

-- name: ApiKeyInsert
INSERT INTO api_keys (key_hash, created_at) VALUES ($1, $2);

-- name: DashboardSessionsEndedDelete
DELETE FROM dashboard_sessions WHERE expires_at <= $1;

-- name: DashboardSessionInsert
INSERT INTO dashboard_sessions (token_hash, key_hash, created_at, expires_at) VALUES ($1, $2, $3, $4);

-- name: DashboardSessionKey
SELECT key_hash FROM dashboard_sessions WHERE token_hash = $1 AND expires_at > $2;

-- name: DashboardSessionDelete
DELETE FROM dashboard_sessions WHERE token_hash = $1;

-- Tenants and the keys issued to them (migration 0070 on PostgreSQL, 0067 on SQLite). Indexes:
-- tenants' primary key (name); tenant_keys' primary key (key_id), its unique key_hash, and
-- idx_tenant_keys_by_tenant (tenant, created_at, key_id) for a tenant's page of keys.

-- name: TenantInsert
INSERT INTO tenants (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING name, created_at, quotas;

-- name: TenantGet
SELECT name, created_at, quotas FROM tenants WHERE name = $1;

-- name: TenantQuotasSet
UPDATE tenants SET quotas = $2 WHERE name = $1 RETURNING name, created_at, quotas;

-- What every API process reloads with the keys.
-- name: TenantsWithQuotas
SELECT name, created_at, quotas FROM tenants WHERE quotas IS NOT NULL;

-- name: TenantKeyInsert
INSERT INTO tenant_keys (key_id, tenant, role, label, key_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)
RETURNING key_id, tenant, role, label, created_at, revoked_at;

-- name: TenantKeyGet
SELECT key_id, tenant, role, label, created_at, revoked_at FROM tenant_keys WHERE tenant = $1 AND key_id = $2;

-- name: TenantKeyRevoke
UPDATE tenant_keys SET revoked_at = COALESCE(revoked_at, $3) WHERE tenant = $1 AND key_id = $2
RETURNING key_id, tenant, role, label, created_at, revoked_at;

-- A tenant's keys go with it (its audit records stay, until the retention purge).
-- name: TenantKeysDelete
DELETE FROM tenant_keys WHERE tenant = $1 RETURNING key_id;

-- name: TenantDelete
DELETE FROM tenants WHERE name = $1;

-- name: TenantKeysActive
SELECT key_hash, key_id, tenant, role FROM tenant_keys WHERE revoked_at IS NULL;
