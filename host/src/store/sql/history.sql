-- Reading executions and their history. Most of the history's reads are put together per call
-- (store/history.rs: a list's filters, each in two parts so PostgreSQL's partial indexes serve
-- them); these are the fixed ones. Indexes: executions' primary key; the partial indexes of
-- pending, claimable and running executions (migration 0065); idx_executions_failure_unhandled.

-- name: ExecutionGet
SELECT execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input,
       output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at,
       lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at,
       abort_requested_at, on_success, concurrency_key, concurrency_limit
FROM executions WHERE execution_id = $1;

-- Executions not yet finished, by status: one part per partial index (pending, claimable,
-- running), each part's condition the index's own, so finished rows are never read. (One
-- `status IN` of all four implies none of those indexes' conditions: it was a sequential scan
-- of the whole table, 99 ms at 1,000,000 finished rows.)
-- name: ExecutionCounts
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status = 'PENDING' GROUP BY status
UNION ALL
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status IN ('QUEUED', 'RETRYING') GROUP BY status
UNION ALL
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status = 'RUNNING' GROUP BY status;

-- The same, of one tenant's endpoints ($1; `domain::tenant`): each row's endpoint is read.
-- name: ExecutionCountsOfTenant
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status = 'PENDING'
  AND CASE WHEN $1 = 'default' THEN endpoint NOT LIKE '%/%' ELSE endpoint LIKE $1 || '/%' END GROUP BY status
UNION ALL
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status IN ('QUEUED', 'RETRYING')
  AND CASE WHEN $1 = 'default' THEN endpoint NOT LIKE '%/%' ELSE endpoint LIKE $1 || '/%' END GROUP BY status
UNION ALL
SELECT status, CAST(COUNT(*) AS BIGINT) FROM executions WHERE status = 'RUNNING'
  AND CASE WHEN $1 = 'default' THEN endpoint NOT LIKE '%/%' ELSE endpoint LIKE $1 || '/%' END GROUP BY status;

-- name: FailuresUnhandled
SELECT execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input,
       output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at,
       lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at,
       on_success, concurrency_key, concurrency_limit
FROM executions
WHERE status = 'FAILED' AND failure_handled_at IS NULL
ORDER BY completed_at LIMIT $1;

-- name: FailureHandled
UPDATE executions SET failure_handled_at = $2 WHERE execution_id = $1 AND status = 'FAILED';

-- Successes whose job asked to be told of them (`on_success`), not told yet: the index of
-- idx_executions_success_unhandled, which holds those alone.
-- name: SuccessesUnhandled
SELECT execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input,
       output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at,
       lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at,
       on_success, concurrency_key, concurrency_limit
FROM executions
WHERE status = 'SUCCESS' AND on_success IS NOT NULL AND success_handled_at IS NULL
ORDER BY completed_at LIMIT $1;

-- name: SuccessHandled
UPDATE executions SET success_handled_at = $2 WHERE execution_id = $1 AND status = 'SUCCESS';
