-- The same schema as migrations/postgres/0001_initial.sql for embedded SQLite: same tables,
-- columns, constraints and indexes; types adjusted, semantics not. JSON is TEXT holding JSON,
-- timestamps are TEXT in one fixed UTC format (YYYY-MM-DDTHH:MM:SS.ffffffZ) so that they sort
-- and compare as text, booleans are INTEGER 0/1, bytes are BLOB.

CREATE TABLE payload_specs (
    name          TEXT          NOT NULL,
    schema_json   TEXT          NOT NULL,
    created_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    updated_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_payload_specs PRIMARY KEY (name)
);
CREATE INDEX idx_payload_specs_page ON payload_specs (created_at, name);

CREATE TABLE configs (
    name          TEXT          NOT NULL,
    values_json   TEXT          NOT NULL,
    created_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    updated_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_configs PRIMARY KEY (name)
);
CREATE INDEX idx_configs_page ON configs (created_at, name);

CREATE TABLE secrets (
    name              TEXT          NOT NULL,
    -- AES-256-GCM envelope: format byte, key id, nonce, ciphertext+tag (see host/src/secret/).
    encrypted_value   BLOB          NOT NULL,
    created_at        TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    updated_at        TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_secrets PRIMARY KEY (name)
);
CREATE INDEX idx_secrets_page ON secrets (created_at, name);

CREATE TABLE endpoints (
    name              TEXT          NOT NULL,
    endpoint_type     TEXT          NOT NULL,    -- HTTP, KAFKA, REDIS_STREAM
    payload_spec_ref  TEXT,
    config_ref        TEXT,
    spec              TEXT          NOT NULL,
    retry_policy      TEXT ,
    -- Bumped on every update: compiled templates are cached per (name, version).
    version           INT           NOT NULL DEFAULT 1,
    created_at        TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    updated_at        TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_endpoints PRIMARY KEY (name),
    CONSTRAINT fk_endpoints_payload_spec FOREIGN KEY (payload_spec_ref) REFERENCES payload_specs (name),
    CONSTRAINT fk_endpoints_config FOREIGN KEY (config_ref) REFERENCES configs (name),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM'))
);
CREATE INDEX idx_endpoints_type ON endpoints (endpoint_type);
CREATE INDEX idx_endpoints_page ON endpoints (created_at, name);
CREATE INDEX idx_endpoints_payload_spec ON endpoints (payload_spec_ref);
CREATE INDEX idx_endpoints_config ON endpoints (config_ref);

-- Which secrets an endpoint's templates name ({{secret.NAME}}), kept at registration so that
-- deleting a secret in use is refused by a foreign key rather than by scanning every spec.
CREATE TABLE endpoint_secret_refs (
    endpoint      TEXT          NOT NULL,
    secret        TEXT          NOT NULL,
    CONSTRAINT pk_endpoint_secret_refs PRIMARY KEY (endpoint, secret),
    CONSTRAINT fk_esr_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints (name) ON DELETE CASCADE,
    CONSTRAINT fk_esr_secret FOREIGN KEY (secret) REFERENCES secrets (name)
);
CREATE INDEX idx_endpoint_secret_refs_secret ON endpoint_secret_refs (secret);

CREATE TABLE jobs (
    job_id                TEXT          NOT NULL,
    crdb_region           TEXT          NOT NULL DEFAULT 'default',
    endpoint              TEXT          NOT NULL,
    endpoint_type         TEXT          NOT NULL,
    trigger_type          TEXT          NOT NULL,    -- IMMEDIATE, DELAYED, CRON
    status                TEXT          NOT NULL DEFAULT 'ACTIVE',
    version               INT           NOT NULL DEFAULT 1,
    previous_version_id   TEXT,
    replaced_by_id        TEXT,
    idempotency_key       TEXT,
    input                 TEXT ,
    run_at                TEXT       ,
    cron_expression       TEXT,
    cron_timezone         TEXT,
    cron_starts_at        TEXT       ,
    cron_ends_at          TEXT       ,
    cron_next_run_at      TEXT       ,
    cron_last_tick_at     TEXT       ,
    created_at            TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    retired_at            TEXT       ,
    CONSTRAINT pk_jobs PRIMARY KEY (job_id),
    CONSTRAINT fk_jobs_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints (name),
    CONSTRAINT chk_trigger_type CHECK (trigger_type IN ('IMMEDIATE', 'DELAYED', 'CRON')),
    CONSTRAINT chk_status CHECK (status IN ('ACTIVE', 'RETIRED')),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM'))
);
CREATE UNIQUE INDEX idx_jobs_idempotency ON jobs (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX idx_jobs_cron_due ON jobs (cron_next_run_at) WHERE trigger_type = 'CRON' AND status = 'ACTIVE';
CREATE INDEX idx_jobs_endpoint ON jobs (endpoint, created_at DESC);
CREATE INDEX idx_jobs_status ON jobs (status, created_at DESC);

CREATE TABLE executions (
    execution_id    TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    job_id          TEXT          NOT NULL,
    endpoint        TEXT          NOT NULL,
    endpoint_type   TEXT          NOT NULL,
    idempotency_key TEXT,
    status          TEXT          NOT NULL DEFAULT 'PENDING',
    input           TEXT ,
    output          TEXT ,
    attempt_count   INT           NOT NULL DEFAULT 0,
    max_attempts    INT           NOT NULL DEFAULT 1,
    worker_id       TEXT,
    run_at          TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    started_at      TEXT       ,
    completed_at    TEXT       ,
    duration_ms     INT,
    created_at      TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_executions PRIMARY KEY (execution_id),
    CONSTRAINT fk_executions_job FOREIGN KEY (job_id) REFERENCES jobs (job_id),
    CONSTRAINT chk_exec_status CHECK (status IN (
        'PENDING', 'QUEUED', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'CANCELLED'
    ))
);
-- The hot-path pickup index.
CREATE INDEX idx_executions_pickup ON executions (status, run_at ASC) WHERE status IN ('QUEUED', 'RETRYING');
CREATE UNIQUE INDEX idx_executions_cron_dedup ON executions (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX idx_executions_by_job ON executions (job_id, created_at DESC);
CREATE INDEX idx_executions_running ON executions (status, started_at) WHERE status = 'RUNNING';

CREATE TABLE attempts (
    attempt_id      TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    status          TEXT          NOT NULL,    -- SUCCESS, FAILED
    started_at      TEXT          NOT NULL,
    completed_at    TEXT       ,
    duration_ms     INT,
    output          TEXT ,
    error           TEXT ,                     -- { type, message, ... }
    created_at      TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_attempts PRIMARY KEY (attempt_id),
    CONSTRAINT fk_attempts_execution FOREIGN KEY (execution_id) REFERENCES executions (execution_id),
    CONSTRAINT uq_attempts_exec_number UNIQUE (execution_id, attempt_number),
    CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED'))
);
CREATE INDEX idx_attempts_by_execution ON attempts (execution_id, attempt_number ASC);

CREATE TABLE execution_logs (
    log_id          TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    level           TEXT          NOT NULL,    -- DEBUG, INFO, WARN, ERROR
    message         TEXT          NOT NULL,
    logged_at       TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_execution_logs PRIMARY KEY (log_id),
    CONSTRAINT fk_logs_execution FOREIGN KEY (execution_id) REFERENCES executions (execution_id),
    CONSTRAINT chk_log_level CHECK (level IN ('DEBUG', 'INFO', 'WARN', 'ERROR'))
);
CREATE INDEX idx_logs_by_execution ON execution_logs (execution_id, logged_at ASC);
CREATE INDEX idx_logs_by_attempt ON execution_logs (execution_id, attempt_number, logged_at ASC);

-- Multi-region stubs: written and read, not yet acted on.
CREATE TABLE region_heartbeats (
    region        TEXT          NOT NULL,
    component     TEXT          NOT NULL,
    last_beat_at  TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    status        TEXT          NOT NULL DEFAULT 'ALIVE',
    metadata      TEXT ,
    CONSTRAINT pk_region_heartbeats PRIMARY KEY (region, component)
);

CREATE TABLE region_status (
    region        TEXT          NOT NULL,
    alive         INTEGER        NOT NULL DEFAULT 1,
    failed_at     TEXT       ,
    adopted_by    TEXT,
    updated_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_region_status PRIMARY KEY (region)
);
INSERT INTO region_status (region, alive, updated_at) VALUES ('default', 1, (strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'));

-- API keys generated by the service itself (embedded mode with no TE_API_KEYS): only the
-- SHA-256 of each key is kept, so a stolen database file does not hand out access.
CREATE TABLE api_keys (
    key_hash      BLOB          NOT NULL,
    created_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_api_keys PRIMARY KEY (key_hash)
);
