-- Statements SQLite alone runs: the worker's and the scheduler's batches a row at a time. In
-- process each statement is cheap and a batch's one commit is what counts; SQLite has one
-- writer at a time, so no row is locked. PostgreSQL writes the same batches as arrays
-- (postgres.sql).

-- One execution's result, fenced: written only if it is still RUNNING under the attempt number
-- that finished.
-- name: ResultWrite
UPDATE executions
SET status = $3, output = $4, completed_at = $5, duration_ms = $6, worker_id = NULL, lease_expires_at = NULL,
    run_at = COALESCE($7, run_at)
WHERE execution_id = $1 AND status = 'RUNNING' AND attempt_count = $2;

-- One job's compare-and-set of its next tick: only the scheduler that still sees `tick` ($2)
-- as next moves it.
-- name: TickAdvance
UPDATE jobs SET cron_next_run_at = $3, cron_last_tick_at = $4, cron_prev_tick_at = cron_last_tick_at
WHERE job_id = $1 AND cron_next_run_at = $2 AND status = 'ACTIVE';

-- One endpoint's due executions for a claim, earliest first.
-- name: ClaimEndpointDue
SELECT execution_id, run_at FROM executions
WHERE endpoint = $1 AND status IN ('QUEUED', 'RETRYING') AND run_at <= $2
ORDER BY run_at
LIMIT $3;

-- The claim: the executions named by the JSON array $4 become RUNNING under worker $1 with a
-- lease until $3. `$2` (now) is read before the write lock is taken; an execution committed
-- meanwhile must not be recorded as started before it existed (MAX of the fixed-width
-- timestamps is the later time). One claimed ahead of its time starts at it.
-- name: ClaimTake
UPDATE executions
SET status = 'RUNNING', worker_id = $1, started_at = MAX($2, created_at, run_at),
    attempt_count = attempt_count + 1, claimed_at = COALESCE(claimed_at, MAX($2, created_at, run_at)),
    lease_expires_at = $3
WHERE execution_id IN (SELECT value FROM json_each($4))
RETURNING execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input,
          output, attempt_count, max_attempts, worker_id, run_at, started_at, completed_at, duration_ms, created_at,
          lease_expires_at, trace_parent, retry_of, scheduled_at, claimed_at, sla_ms, trigger_reason, expires_at,
          on_success, concurrency_key, concurrency_limit;

-- One lease extended to $3. MAX over fixed-width text is MAX over time: a renewal never
-- shortens a lease.
-- name: LeaseExtend
UPDATE executions SET lease_expires_at = MAX(COALESCE(lease_expires_at, $3), $3)
WHERE execution_id = $1 AND attempt_count = $2 AND status = 'RUNNING';

-- A concurrency key's admission (`store/keys.rs`), a key at a time (PostgreSQL's is one
-- statement for many keys, postgres.sql KeysAdmit): the room of key $2 of endpoint $1 for its
-- executions due by $3 — the oldest waiting one's `max_in_flight` less the key's executions in
-- flight; NULL when none waits.
-- name: KeyRoom
SELECT (SELECT x.concurrency_limit FROM executions x
        WHERE x.endpoint = $1 AND x.concurrency_key = $2 AND x.status = 'PENDING' AND x.run_at <= $3
        ORDER BY x.run_at, x.execution_id LIMIT 1)
     - (SELECT COUNT(*) FROM executions a
        WHERE a.endpoint = $1 AND a.concurrency_key = $2 AND a.concurrency_key IS NOT NULL
          AND a.status IN ('QUEUED', 'RUNNING', 'RETRYING'));

-- The key's $4 oldest waiting executions due by $3 become QUEUED.
-- name: KeyAdmit
UPDATE executions SET status = 'QUEUED', key_waiting = FALSE
WHERE execution_id IN (SELECT x.execution_id FROM executions x
                       WHERE x.endpoint = $1 AND x.concurrency_key = $2 AND x.concurrency_key IS NOT NULL
                         AND x.status = 'PENDING' AND x.run_at <= $3
                       ORDER BY x.run_at, x.execution_id LIMIT $4);

-- The key's other due executions not judged yet wait.
-- name: KeyMark
UPDATE executions SET key_waiting = TRUE
WHERE endpoint = $1 AND concurrency_key = $2 AND concurrency_key IS NOT NULL AND status = 'PENDING'
  AND NOT key_waiting AND run_at <= $3;
