-- The scheduler's statements: cron ticks found and made ahead of their time, due executions
-- promoted to the queue (through a cron job's overlap policy), expired leases reclaimed. A
-- batch of ticks is recorded per backend (postgres.rs: UNNEST of arrays; sqlite.rs: a statement
-- per tick). Indexes: idx_jobs_cron_due (active cron jobs by next tick); the partial indexes of
-- pending, claimable and running executions (migration 0065); executions' (job_id, status).

-- $2: a tenant, or null for every tenant's (the tenant of a job is its endpoint's stored name's:
-- `domain::tenant`).
-- name: CronUpcoming
SELECT job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success
FROM jobs
WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at IS NOT NULL
  AND (CAST($2 AS TEXT) IS NULL
       OR CASE WHEN $2 = 'default' THEN endpoint NOT LIKE '%/%' ELSE endpoint LIKE $2 || '/%' END)
ORDER BY cron_next_run_at
LIMIT $1;

-- The earliest next tick that may be materialized. Served by idx_jobs_cron_due.
-- name: CronNextDue
SELECT cron_next_run_at FROM jobs
WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at IS NOT NULL
  AND (cron_last_tick_at IS NULL OR cron_last_tick_at <= $1)
ORDER BY cron_next_run_at
LIMIT 1;

-- $1 the horizon, $2 now: a job is materialized at most one tick ahead.
-- name: CronDue
SELECT job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success
FROM jobs
WHERE trigger_type = 'CRON' AND status = 'ACTIVE' AND cron_next_run_at <= $1
  AND (cron_last_tick_at IS NULL OR cron_last_tick_at <= $2)
ORDER BY cron_next_run_at
LIMIT $3;

-- Due ticks of jobs with an overlap policy (every other execution has none) while an earlier
-- execution of the job is unfinished: a `skip` tick is skipped, and a `buffer_one` tick too
-- when an older one already waits. $1 now, $2 the output saying why. A tick of an endpoint with
-- a concurrency key waits for its key instead (`store/keys.rs`): none is read here.
-- name: TicksOverlappingSkip
UPDATE executions SET status = 'CANCELLED', completed_at = $1, output = $2
WHERE status = 'PENDING' AND concurrency_key IS NULL AND run_at <= $1 AND overlap_policy IS NOT NULL
  AND (EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id
               AND p.status IN ('QUEUED', 'RETRYING'))
       OR EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id AND p.status = 'RUNNING'))
  AND (overlap_policy = 'skip'
       OR EXISTS (SELECT 1 FROM executions b WHERE b.job_id = executions.job_id
                  AND b.status = 'PENDING' AND b.overlap_policy IS NOT NULL
                  AND (b.run_at, b.execution_id) < (executions.run_at, executions.execution_id)));

-- PENDING executions due by $2 become QUEUED. An overlap policy is judged at the tick's time
-- ($1), and only the oldest due tick of such a job, with no earlier execution unfinished, is
-- released at once; anything else may go ahead of its time. Executions with a concurrency key
-- are admitted by their key (`store/keys.rs`), not here: idx_executions_pending_unkeyed.
-- name: ExecutionsPromote
UPDATE executions SET status = 'QUEUED'
WHERE status = 'PENDING' AND concurrency_key IS NULL AND run_at <= $2
  AND (overlap_policy IS NULL
       OR (run_at <= $1
           AND NOT (EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id
                            AND p.status IN ('QUEUED', 'RETRYING'))
                    OR EXISTS (SELECT 1 FROM executions p WHERE p.job_id = executions.job_id
                               AND p.status = 'RUNNING')
                    OR EXISTS (SELECT 1 FROM executions b WHERE b.job_id = executions.job_id
                               AND b.status = 'PENDING' AND b.overlap_policy IS NOT NULL
                               AND (b.run_at, b.execution_id) < (executions.run_at, executions.execution_id)))))
RETURNING run_at;

-- Due ticks still PENDING after a promotion are held by their job's overlap policy: they are
-- looked at again each promotion interval, not in a spin.
-- name: ExecutionNextPending
SELECT run_at FROM executions WHERE status = 'PENDING' AND run_at > $1 ORDER BY run_at LIMIT 1;

-- RUNNING executions whose lease expired by the database's clock become RETRYING (FAILED when
-- out of attempts; CANCELLED when an abort was asked for: the worker that was to end it is
-- gone). The row lock this takes also fences the lost worker: its finishing write waits for
-- this one and then finds the execution no longer RUNNING. A row some statement holds locked
-- this instant (a live worker renewing or finishing it) is passed over rather than waited on
-- in an order that could deadlock, and looked at again next round. $1 this process's clock
-- (the database's own where it is embedded).
-- name: ExecutionsReclaim
UPDATE executions
SET status = CASE WHEN abort_requested_at IS NOT NULL THEN 'CANCELLED'
                  WHEN attempt_count >= max_attempts THEN 'FAILED' ELSE 'RETRYING' END,
    completed_at = CASE WHEN abort_requested_at IS NOT NULL OR attempt_count >= max_attempts THEN $1 ELSE NULL END,
    worker_id = NULL,
    lease_expires_at = NULL,
    run_at = $1
WHERE execution_id IN (SELECT execution_id FROM executions
                       WHERE status = 'RUNNING' AND lease_expires_at < /*{db_now}*/
                       ORDER BY execution_id/*{lock_skip_locked}*/)
  AND status = 'RUNNING'
RETURNING execution_id, attempt_count, started_at;

-- The failed attempt of a reclaimed execution. (execution, attempt number) is unique only
-- within a partition where attempts are partitioned by time: asked first.
-- name: AttemptLostInsert
INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at, error, created_at)
SELECT $1, $2, $3, 'FAILED', $4, $5, $6, $5
WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.execution_id = $2 AND a.attempt_number = $3)
ON CONFLICT DO NOTHING;
