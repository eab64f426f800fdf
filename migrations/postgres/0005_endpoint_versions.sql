-- PUT /endpoints/{name} applies to future jobs only (the brief): every version of an endpoint
-- is kept, each job records the version it was created against, and its executions are
-- delivered with that version however the endpoint changes afterwards.
CREATE TABLE endpoint_versions (
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
INSERT INTO endpoint_versions (name, version, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, plugin, renderer, created_at)
    SELECT name, version, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, plugin, renderer, updated_at FROM endpoints;

ALTER TABLE jobs ADD COLUMN endpoint_version INT;
UPDATE jobs SET endpoint_version = (SELECT version FROM endpoints WHERE endpoints.name = jobs.endpoint);
ALTER TABLE executions ADD COLUMN endpoint_version INT;
UPDATE executions SET endpoint_version = (SELECT endpoint_version FROM jobs WHERE jobs.job_id = executions.job_id);
