-- As migrations/postgres/0076_on_success.sql.
ALTER TABLE jobs ADD COLUMN on_success TEXT;
ALTER TABLE executions ADD COLUMN on_success TEXT;
ALTER TABLE executions ADD COLUMN success_handled_at TEXT;
CREATE INDEX idx_executions_success_unhandled ON executions (completed_at)
    WHERE status = 'SUCCESS' AND on_success IS NOT NULL AND success_handled_at IS NULL;
