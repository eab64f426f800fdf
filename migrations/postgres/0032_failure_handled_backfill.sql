-- Failures from before callbacks existed are not announced now.
UPDATE executions SET failure_handled_at = COALESCE(completed_at, created_at) WHERE status = 'FAILED' AND failure_handled_at IS NULL;
