-- Writes to executions outside the worker's path: the API's retries and cancels, and the
-- deletes of finished history (retention, a job's or endpoint's delete). Indexes: executions'
-- primary key and unique (job_id, idempotency_key); the partial index of finished executions
-- by creation (migration 0065); attempts' and execution_logs' execution_id.

-- name: ExecutionGetByKey
SELECT execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input,
       output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at,
       lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at
FROM executions WHERE job_id = $1 AND idempotency_key = $2;

-- An abort of a RUNNING execution's delivery asked for (`cancel?running=abort`): the worker
-- that holds it finds it by `ExecutionsAborting` and ends the attempt; true when it is RUNNING.
-- The first time asked is kept.
-- name: ExecutionAbortRequest
UPDATE executions SET abort_requested_at = COALESCE(abort_requested_at, $2)
WHERE execution_id = $1 AND status = 'RUNNING';

-- The aborts asked of a worker (idx_executions_aborting: the few executions ever aborted).
-- `status = 'RUNNING'` confines it to the queue's partition where executions are partitioned.
-- name: ExecutionsAborting
SELECT execution_id FROM executions
WHERE worker_id = $1 AND abort_requested_at IS NOT NULL AND status = 'RUNNING';

-- Compare-and-set against the claim: whichever commits first wins.
-- name: ExecutionCancel
UPDATE executions SET status = 'CANCELLED', completed_at = $2, worker_id = NULL
WHERE execution_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING');
