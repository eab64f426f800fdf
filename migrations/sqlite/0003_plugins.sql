-- SQLite cannot alter a CHECK constraint, so the endpoint type's check is widened by
-- rebuilding the tables: endpoints and jobs (whose checks change) and every table that refers
-- to them. sqlx runs a SQLite migration inside a transaction, where foreign keys stay on, so
-- the new tables are built beside the old ones referring to each other (*_new), filled
-- parents first, the old tables dropped children first (no reference ever dangles), and the
-- new ones renamed: renaming a parent rewrites its children's references to the final name.
-- The rest is the same as migrations/postgres/0003_plugins.sql.

CREATE TABLE plugins (
    name          TEXT          NOT NULL,
    version       INT           NOT NULL,
    sha256        TEXT          NOT NULL,
    bytes         BLOB          NOT NULL,
    world         TEXT          NOT NULL,
    grants        TEXT          NOT NULL,
    limits        TEXT          NOT NULL,
    created_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_plugins PRIMARY KEY (name, version),
    CONSTRAINT chk_plugin_world CHECK (world IN ('transport-plugin', 'renderer-plugin'))
);
CREATE INDEX idx_plugins_page ON plugins (created_at, name);

CREATE TABLE endpoints_new (
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
    plugin            TEXT,
    renderer          TEXT,
    CONSTRAINT pk_endpoints PRIMARY KEY (name),
    CONSTRAINT fk_endpoints_payload_spec FOREIGN KEY (payload_spec_ref) REFERENCES payload_specs (name),
    CONSTRAINT fk_endpoints_config FOREIGN KEY (config_ref) REFERENCES configs (name),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM', 'PLUGIN'))
);
INSERT INTO endpoints_new (name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at) SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at FROM endpoints;

CREATE TABLE endpoint_secret_refs_new (
    endpoint      TEXT          NOT NULL,
    secret        TEXT          NOT NULL,
    CONSTRAINT pk_endpoint_secret_refs PRIMARY KEY (endpoint, secret),
    CONSTRAINT fk_esr_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints_new (name) ON DELETE CASCADE,
    CONSTRAINT fk_esr_secret FOREIGN KEY (secret) REFERENCES secrets (name)
);
INSERT INTO endpoint_secret_refs_new (endpoint, secret) SELECT endpoint, secret FROM endpoint_secret_refs;

CREATE TABLE jobs_new (
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
    CONSTRAINT fk_jobs_endpoint FOREIGN KEY (endpoint) REFERENCES endpoints_new (name),
    CONSTRAINT chk_trigger_type CHECK (trigger_type IN ('IMMEDIATE', 'DELAYED', 'CRON')),
    CONSTRAINT chk_status CHECK (status IN ('ACTIVE', 'RETIRED')),
    CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM', 'PLUGIN'))
);
INSERT INTO jobs_new (job_id, crdb_region, endpoint, endpoint_type, trigger_type, status, version, previous_version_id, replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at, cron_next_run_at, cron_last_tick_at, created_at, retired_at) SELECT job_id, crdb_region, endpoint, endpoint_type, trigger_type, status, version, previous_version_id, replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at, cron_next_run_at, cron_last_tick_at, created_at, retired_at FROM jobs;

CREATE TABLE executions_new (
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
    CONSTRAINT fk_executions_job FOREIGN KEY (job_id) REFERENCES jobs_new (job_id),
    CONSTRAINT chk_exec_status CHECK (status IN (
        'PENDING', 'QUEUED', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'CANCELLED'
    ))
);
INSERT INTO executions_new (execution_id, crdb_region, job_id, endpoint, endpoint_type, idempotency_key, status, input, output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at) SELECT execution_id, crdb_region, job_id, endpoint, endpoint_type, idempotency_key, status, input, output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at FROM executions;

CREATE TABLE attempts_new (
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
    CONSTRAINT fk_attempts_execution FOREIGN KEY (execution_id) REFERENCES executions_new (execution_id),
    CONSTRAINT uq_attempts_exec_number UNIQUE (execution_id, attempt_number),
    CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED'))
);
INSERT INTO attempts_new (attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at) SELECT attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at FROM attempts;

CREATE TABLE execution_logs_new (
    log_id          TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    level           TEXT          NOT NULL,    -- DEBUG, INFO, WARN, ERROR
    message         TEXT          NOT NULL,
    logged_at       TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_execution_logs PRIMARY KEY (log_id),
    CONSTRAINT fk_logs_execution FOREIGN KEY (execution_id) REFERENCES executions_new (execution_id),
    CONSTRAINT chk_log_level CHECK (level IN ('DEBUG', 'INFO', 'WARN', 'ERROR'))
);
INSERT INTO execution_logs_new (log_id, crdb_region, execution_id, attempt_number, level, message, logged_at) SELECT log_id, crdb_region, execution_id, attempt_number, level, message, logged_at FROM execution_logs;

DROP TABLE execution_logs;
DROP TABLE attempts;
DROP TABLE executions;
DROP TABLE jobs;
DROP TABLE endpoint_secret_refs;
DROP TABLE endpoints;

ALTER TABLE endpoints_new RENAME TO endpoints;
ALTER TABLE endpoint_secret_refs_new RENAME TO endpoint_secret_refs;
ALTER TABLE jobs_new RENAME TO jobs;
ALTER TABLE executions_new RENAME TO executions;
ALTER TABLE attempts_new RENAME TO attempts;
ALTER TABLE execution_logs_new RENAME TO execution_logs;

CREATE INDEX idx_endpoints_type ON endpoints (endpoint_type);
CREATE INDEX idx_endpoints_page ON endpoints (created_at, name);
CREATE INDEX idx_endpoints_payload_spec ON endpoints (payload_spec_ref);
CREATE INDEX idx_endpoints_config ON endpoints (config_ref);
CREATE INDEX idx_endpoint_secret_refs_secret ON endpoint_secret_refs (secret);
CREATE UNIQUE INDEX idx_jobs_idempotency ON jobs (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX idx_jobs_cron_due ON jobs (cron_next_run_at) WHERE trigger_type = 'CRON' AND status = 'ACTIVE';
CREATE INDEX idx_jobs_endpoint ON jobs (endpoint, created_at DESC);
CREATE INDEX idx_jobs_status ON jobs (status, created_at DESC);
CREATE INDEX idx_executions_pickup ON executions (status, run_at ASC) WHERE status IN ('QUEUED', 'RETRYING');
CREATE UNIQUE INDEX idx_executions_cron_dedup ON executions (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX idx_executions_by_job ON executions (job_id, created_at DESC);
CREATE INDEX idx_executions_running ON executions (status, started_at) WHERE status = 'RUNNING';
CREATE INDEX idx_executions_claim ON executions (run_at) WHERE status IN ('QUEUED', 'RETRYING');
CREATE INDEX idx_executions_pending ON executions (run_at) WHERE status = 'PENDING';
CREATE INDEX idx_attempts_by_execution ON attempts (execution_id, attempt_number ASC);
CREATE INDEX idx_logs_by_execution ON execution_logs (execution_id, logged_at ASC);
CREATE INDEX idx_logs_by_attempt ON execution_logs (execution_id, attempt_number, logged_at ASC);
