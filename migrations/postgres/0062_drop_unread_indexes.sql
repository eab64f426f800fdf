-- Two indexes nothing reads, each an extra insertion for every row a delivery writes:
-- attempts are found by the index of their UNIQUE (execution_id, attempt_number) constraint,
-- which idx_attempts_by_execution repeated column for column; log lines are read only by
-- execution in time order (idx_logs_by_execution), never by attempt.
DROP INDEX IF EXISTS idx_attempts_by_execution;
DROP INDEX IF EXISTS idx_logs_by_attempt;
