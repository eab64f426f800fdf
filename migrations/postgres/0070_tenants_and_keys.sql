-- Tenants, and API keys issued to them with a role. Every existing deployment has one tenant,
-- `default`, made here. Operator keys (TE_API_KEYS, or the key the service generated for
-- itself, in `api_keys`) stay outside these tables: they belong to no tenant.
CREATE TABLE tenants (
    name          TEXT          NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_tenants PRIMARY KEY (name)
);
INSERT INTO tenants (name, created_at) VALUES ('default', now());

-- A key is stored as the SHA-256 of its text (shown once, when made). A revoked key keeps its
-- row, with `revoked_at`, so that what it did stays attributable; every API process reloads
-- the keys not revoked every 250 ms (api::auth), which is how a revocation reaches them all.
CREATE TABLE tenant_keys (
    key_id        TEXT          NOT NULL,
    tenant        TEXT          NOT NULL,
    role          TEXT          NOT NULL,
    label         TEXT,
    key_hash      BYTEA         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL,
    revoked_at    TIMESTAMPTZ,
    CONSTRAINT pk_tenant_keys PRIMARY KEY (key_id),
    CONSTRAINT uq_tenant_keys_hash UNIQUE (key_hash),
    CONSTRAINT fk_tenant_keys_tenant FOREIGN KEY (tenant) REFERENCES tenants (name),
    CONSTRAINT ck_tenant_keys_role CHECK (role IN ('admin', 'write', 'read'))
);
-- A tenant's keys, a page at a time.
CREATE INDEX idx_tenant_keys_by_tenant ON tenant_keys (tenant, created_at, key_id);
