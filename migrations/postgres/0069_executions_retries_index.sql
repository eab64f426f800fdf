-- The executions that retry another (`retry_of`), by job: few, and what tells the retention
-- purge that a one-shot job still has an execution besides its first (store/partitions.rs:
-- a one-shot job goes with the history partition its first execution is dropped with, unless
-- it has a retry).
CREATE INDEX IF NOT EXISTS idx_executions_retries ON executions (job_id) WHERE retry_of IS NOT NULL;
