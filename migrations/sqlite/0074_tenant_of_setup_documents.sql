-- The tenant each setup document and endpoint belongs to (`domain::tenant`): a tenant's
-- resources are stored under `tenant/name`, the `default` tenant's under their own names, so
-- the tenant is a function of the name, computed here rather than written by each insert (it
-- can never disagree with the name). Every row from before tenants is the `default` tenant's.
-- (SQLite: a VIRTUAL column, the one kind ALTER TABLE may add, and so without NOT NULL; its
-- expression is never null.)
-- Lists of a tenant's rows read the index on (tenant, created_at, name).
ALTER TABLE payload_specs ADD COLUMN tenant TEXT
    GENERATED ALWAYS AS (CASE WHEN instr(name, '/') = 0 THEN 'default' ELSE substr(name, 1, instr(name, '/') - 1) END) VIRTUAL;
ALTER TABLE configs ADD COLUMN tenant TEXT
    GENERATED ALWAYS AS (CASE WHEN instr(name, '/') = 0 THEN 'default' ELSE substr(name, 1, instr(name, '/') - 1) END) VIRTUAL;
ALTER TABLE secrets ADD COLUMN tenant TEXT
    GENERATED ALWAYS AS (CASE WHEN instr(name, '/') = 0 THEN 'default' ELSE substr(name, 1, instr(name, '/') - 1) END) VIRTUAL;
ALTER TABLE endpoints ADD COLUMN tenant TEXT
    GENERATED ALWAYS AS (CASE WHEN instr(name, '/') = 0 THEN 'default' ELSE substr(name, 1, instr(name, '/') - 1) END) VIRTUAL;

CREATE INDEX IF NOT EXISTS idx_payload_specs_tenant ON payload_specs (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_configs_tenant ON configs (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_secrets_tenant ON secrets (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_endpoints_tenant ON endpoints (tenant, created_at, name);
