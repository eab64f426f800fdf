-- As migrations/postgres/0074_execution_abort.sql. SQLite cannot change a CHECK constraint:
-- attempts are rebuilt with the one that admits CANCELLED (no table refers to them).
ALTER TABLE executions ADD COLUMN abort_requested_at TEXT;
CREATE INDEX idx_executions_aborting ON executions (worker_id) WHERE abort_requested_at IS NOT NULL;

CREATE TABLE attempts_new (
    attempt_id      TEXT          NOT NULL,
    crdb_region     TEXT          NOT NULL DEFAULT 'default',
    execution_id    TEXT          NOT NULL,
    attempt_number  INT           NOT NULL,
    status          TEXT          NOT NULL,    -- SUCCESS, FAILED, CANCELLED
    started_at      TEXT          NOT NULL,
    completed_at    TEXT       ,
    duration_ms     INT,
    output          TEXT ,
    error           TEXT ,                     -- { type, message, ... }
    created_at      TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_attempts PRIMARY KEY (attempt_id),
    CONSTRAINT uq_attempts_exec_number UNIQUE (execution_id, attempt_number),
    CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED', 'CANCELLED'))
);
INSERT INTO attempts_new (attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at)
    SELECT attempt_id, crdb_region, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_new RENAME TO attempts;
