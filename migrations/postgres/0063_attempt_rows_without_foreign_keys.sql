-- What a delivery writes costs fewer checks and index entries (measured in docs/benchmarks.md,
-- "Side by side with graphile-worker"):
--
-- - No foreign keys from attempts and log lines to their execution. Each row's key check was
--   a query of its own inside PostgreSQL (7% of the whole machine's CPU during a drain, two
--   rows and two checks per delivery). They guarded nothing the store does not already: an
--   attempt and its log lines are written only in the transaction whose fenced UPDATE found
--   their execution RUNNING under that attempt number, and the purge deletes log lines and
--   attempts before their executions.
-- - Log lines keyed by what reads them: every read is one execution's lines in time order, so
--   the primary key (execution_id, logged_at, log_id) serves it, and idx_logs_by_execution
--   (the same order, kept beside a primary key on log_id alone that nothing read) goes. One
--   index entry per line instead of two.
ALTER TABLE attempts DROP CONSTRAINT fk_attempts_execution;
ALTER TABLE execution_logs DROP CONSTRAINT fk_logs_execution;
ALTER TABLE execution_logs
    DROP CONSTRAINT pk_execution_logs,
    ADD CONSTRAINT pk_execution_logs PRIMARY KEY (execution_id, logged_at, log_id);
DROP INDEX IF EXISTS idx_logs_by_execution;
