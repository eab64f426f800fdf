-- `POST /executions/{id}/cancel?running=abort`: when an abort of a RUNNING execution was asked
-- for. The worker holding it stops the delivery (the connection dropped), and records the
-- attempt and the execution CANCELLED; were the worker lost, the reclaimer cancels it instead
-- of retrying it.
ALTER TABLE executions ADD COLUMN abort_requested_at TIMESTAMPTZ;

-- A worker's aborts asked for, by worker: each worker asks every second while it holds
-- anything (and at once when told, LISTEN/NOTIFY), so the index is of the few rows ever
-- aborted, not of the queue.
CREATE INDEX IF NOT EXISTS idx_executions_aborting ON executions (worker_id) WHERE abort_requested_at IS NOT NULL;

-- An aborted attempt is CANCELLED. Added NOT VALID here, and validated by the next migration
-- in a transaction of its own: the check of the rows already there (the whole history) then
-- takes a lock that lets attempts be written meanwhile, where adding it valid would hold every
-- write back while it read them. (Left NOT VALID, the partitions made from the table later
-- would conflict with it.)
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS chk_attempt_status;
ALTER TABLE attempts ADD CONSTRAINT chk_attempt_status CHECK (status IN ('SUCCESS', 'FAILED', 'CANCELLED')) NOT VALID;
