-- Success callbacks (`on_success`): the endpoint a job's successful executions are told to.
-- Kept on each execution as well (copied from its job when it is made), so that the successes
-- still to announce are an index of their own, however many successes have no callback.
ALTER TABLE jobs ADD COLUMN on_success TEXT;
ALTER TABLE executions ADD COLUMN on_success TEXT;
ALTER TABLE executions ADD COLUMN success_handled_at TIMESTAMPTZ;
CREATE INDEX IF NOT EXISTS idx_executions_success_unhandled ON executions (completed_at)
    WHERE status = 'SUCCESS' AND on_success IS NOT NULL AND success_handled_at IS NULL;
