-- As migrations/postgres/0077_concurrency_keys.sql.
ALTER TABLE endpoints ADD COLUMN concurrency TEXT;
ALTER TABLE executions ADD COLUMN concurrency_key TEXT;
ALTER TABLE executions ADD COLUMN concurrency_limit INT;
ALTER TABLE executions ADD COLUMN key_waiting BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX idx_executions_key_in_flight ON executions (endpoint, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'RETRYING');
CREATE INDEX idx_executions_key_pending ON executions (endpoint, concurrency_key, run_at, execution_id)
    WHERE concurrency_key IS NOT NULL AND status = 'PENDING';
CREATE INDEX idx_executions_key_unjudged ON executions (endpoint, concurrency_key, run_at)
    WHERE concurrency_key IS NOT NULL AND status = 'PENDING' AND NOT key_waiting;
CREATE INDEX idx_executions_pending_unkeyed ON executions (run_at)
    WHERE status = 'PENDING' AND concurrency_key IS NULL;
