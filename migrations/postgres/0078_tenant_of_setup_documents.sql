-- The tenant each setup document and endpoint belongs to (`domain::tenant`): a tenant's
-- resources are stored under `tenant/name`, the `default` tenant's under their own names, so
-- the tenant is a function of the name, computed here rather than written by each insert (it
-- can never disagree with the name). Every row from before tenants is the `default` tenant's.
-- Lists of a tenant's rows read the index on (tenant, created_at, name).
ALTER TABLE payload_specs ADD COLUMN tenant TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN strpos(name, '/') = 0 THEN 'default' ELSE split_part(name, '/', 1) END) STORED;
ALTER TABLE configs ADD COLUMN tenant TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN strpos(name, '/') = 0 THEN 'default' ELSE split_part(name, '/', 1) END) STORED;
ALTER TABLE secrets ADD COLUMN tenant TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN strpos(name, '/') = 0 THEN 'default' ELSE split_part(name, '/', 1) END) STORED;
ALTER TABLE endpoints ADD COLUMN tenant TEXT NOT NULL
    GENERATED ALWAYS AS (CASE WHEN strpos(name, '/') = 0 THEN 'default' ELSE split_part(name, '/', 1) END) STORED;

CREATE INDEX IF NOT EXISTS idx_payload_specs_tenant ON payload_specs (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_configs_tenant ON configs (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_secrets_tenant ON secrets (tenant, created_at, name);
CREATE INDEX IF NOT EXISTS idx_endpoints_tenant ON endpoints (tenant, created_at, name);
