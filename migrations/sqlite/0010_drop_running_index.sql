DROP INDEX IF EXISTS idx_executions_running;
