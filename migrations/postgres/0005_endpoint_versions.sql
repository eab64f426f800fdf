-- no-transaction
-- PUT /endpoints/{name} applies to future jobs only (the brief): every version of an endpoint
-- is kept, each job records the version it was created against, and its executions are
-- delivered with that version however the endpoint changes afterwards.
--
-- One schema change per transaction, since CockroachDB does not support a column added and
-- then written in the same transaction; every step is safe to repeat, so a run stopped
-- half-way is finished by the next. (Rewritten in this form on 2026-11-23; databases that
-- applied the single-transaction text of 0.1.0 are accepted, see store/postgres.rs.)
BEGIN;
CREATE TABLE IF NOT EXISTS endpoint_versions (
    name              TEXT          NOT NULL,
    version           INT           NOT NULL,
    endpoint_type     TEXT          NOT NULL,
    payload_spec_ref  TEXT,
    config_ref        TEXT,
    spec              JSONB         NOT NULL,
    retry_policy      JSONB,
    plugin            TEXT,
    renderer          TEXT,
    created_at        TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_endpoint_versions PRIMARY KEY (name, version),
    CONSTRAINT fk_endpoint_versions_endpoint FOREIGN KEY (name) REFERENCES endpoints (name) ON DELETE CASCADE
);
COMMIT;

BEGIN;
INSERT INTO endpoint_versions (name, version, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, plugin, renderer, created_at)
    SELECT name, version, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, plugin, renderer, updated_at FROM endpoints
    ON CONFLICT (name, version) DO NOTHING;
COMMIT;

BEGIN;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS endpoint_version INT;
COMMIT;

BEGIN;
UPDATE jobs SET endpoint_version = (SELECT version FROM endpoints WHERE endpoints.name = jobs.endpoint)
WHERE endpoint_version IS NULL;
COMMIT;

BEGIN;
ALTER TABLE executions ADD COLUMN IF NOT EXISTS endpoint_version INT;
COMMIT;

BEGIN;
UPDATE executions SET endpoint_version = (SELECT endpoint_version FROM jobs WHERE jobs.job_id = executions.job_id)
WHERE endpoint_version IS NULL;
COMMIT;
