-- The dead-letter view and replay's scan: failed executions in creation order.
CREATE INDEX idx_executions_failed ON executions (created_at, execution_id) WHERE status = 'FAILED';
