-- The failure notifier's scan: failed executions not yet handled.
CREATE INDEX idx_executions_failure_unhandled ON executions (completed_at) WHERE status = 'FAILED' AND failure_handled_at IS NULL;
