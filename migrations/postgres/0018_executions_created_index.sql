-- GET /executions across jobs, in creation order; also the retention purge's scan by age.
CREATE INDEX idx_executions_created ON executions (created_at, execution_id);
