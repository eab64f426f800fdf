-- Tenants and the API keys issued to them, as migrations/postgres/0070_tenants_and_keys.sql.
CREATE TABLE tenants (
    name          TEXT          NOT NULL,
    created_at    TEXT          NOT NULL,
    CONSTRAINT pk_tenants PRIMARY KEY (name)
);
INSERT INTO tenants (name, created_at) VALUES ('default', strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z');

CREATE TABLE tenant_keys (
    key_id        TEXT          NOT NULL,
    tenant        TEXT          NOT NULL,
    role          TEXT          NOT NULL,
    label         TEXT,
    key_hash      BLOB          NOT NULL,
    created_at    TEXT          NOT NULL,
    revoked_at    TEXT,
    CONSTRAINT pk_tenant_keys PRIMARY KEY (key_id),
    CONSTRAINT uq_tenant_keys_hash UNIQUE (key_hash),
    CONSTRAINT fk_tenant_keys_tenant FOREIGN KEY (tenant) REFERENCES tenants (name),
    CONSTRAINT ck_tenant_keys_role CHECK (role IN ('admin', 'write', 'read'))
);
CREATE INDEX idx_tenant_keys_by_tenant ON tenant_keys (tenant, created_at, key_id);
