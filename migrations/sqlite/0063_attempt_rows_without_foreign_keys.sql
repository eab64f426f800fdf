-- What a delivery writes costs fewer checks and index entries (as on PostgreSQL, where the
-- reasons are measured): no foreign keys from attempts and log lines to their execution (an
-- attempt and its lines are written only in the transaction whose fenced UPDATE found the
-- execution RUNNING under that attempt number; the purge deletes them before their execution),
-- and log lines keyed by what reads them, one execution's lines in time order. SQLite cannot
-- drop a constraint, so both tables are rebuilt (no table refers to either).
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
    CONSTRAINT uq_attempts_exec_number UNIQUE (execution_id, attempt_number),
    CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED'))
);
INSERT INTO attempts_new (attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at)
    SELECT attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_new RENAME TO attempts;

CREATE TABLE execution_logs_new (
    log_id          TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    level           TEXT          NOT NULL,    -- DEBUG, INFO, WARN, ERROR
    message         TEXT          NOT NULL,
    logged_at       TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_execution_logs PRIMARY KEY (execution_id, logged_at, log_id),
    CONSTRAINT chk_log_level CHECK (level IN ('DEBUG', 'INFO', 'WARN', 'ERROR'))
);
INSERT INTO execution_logs_new (log_id, crdb_region, execution_id, attempt_number, level, message, logged_at)
    SELECT log_id, crdb_region, execution_id, attempt_number, level, message, logged_at FROM execution_logs;
DROP TABLE execution_logs;
ALTER TABLE execution_logs_new RENAME TO execution_logs;
