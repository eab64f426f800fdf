-- POST /executions/{id}/retry and /executions/replay: a failed or cancelled execution's new
-- series of attempts is a new execution naming the one it retries (which stays as the record).
ALTER TABLE executions ADD COLUMN retry_of TEXT;
-- GET /executions across jobs, in creation order; also the retention purge's scan by age.
CREATE INDEX idx_executions_created ON executions (created_at, execution_id);
-- The dead-letter view and replay's scan: failed executions in creation order.
CREATE INDEX idx_executions_failed ON executions (created_at, execution_id) WHERE status = 'FAILED';
