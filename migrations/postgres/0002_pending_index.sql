-- The promoter sleeps until the earliest PENDING run_at; this keeps that lookup (and the
-- promotion itself) an index range scan however many executions have finished.
CREATE INDEX idx_executions_pending ON executions (run_at) WHERE status = 'PENDING';
