-- Statements PostgreSQL alone runs: a batch's columns travel as one array each and UNNEST turns
-- them back into rows, so a batch costs one round trip and the statement's text never changes
-- with its size (each connection prepares it once). SQLite writes the same batches a row at a
-- time (sqlite.sql). The statements built rather than written out (the claim, the batch
-- inserts of jobs and executions) are in postgres/statements.rs.

-- The result write: the batch's executions, found by id among the RUNNING ones, locked in id
-- order (the module's lock order) and moved out of the queue. Its plan probes the primary key
-- for each id whatever the table holds (see `postgres_autovacuum.sql`, the statistics of
-- `status`). The status is asked again in the UPDATE: it confines the update to the queue's
-- partition.
-- name: ResultWrite
WITH locked AS MATERIALIZED (
    SELECT e.execution_id, v.status, v.output, v.completed_at, v.duration_ms, v.retry_at
    FROM executions AS e
    JOIN UNNEST($1::text[], $2::int4[], $3::text[], $4::jsonb[], $5::timestamptz[], $6::int4[], $7::timestamptz[])
         AS v(execution_id, attempt, status, output, completed_at, duration_ms, retry_at)
      ON e.execution_id = v.execution_id AND e.attempt_count = v.attempt
    WHERE e.status = 'RUNNING'
    ORDER BY e.execution_id FOR UPDATE OF e)
UPDATE executions AS e
SET status = l.status, output = l.output, completed_at = l.completed_at, duration_ms = l.duration_ms,
    worker_id = NULL, lease_expires_at = NULL, run_at = COALESCE(l.retry_at, e.run_at)
FROM locked AS l
WHERE e.execution_id = l.execution_id AND e.status = 'RUNNING'
RETURNING e.execution_id;

-- The attempts of the outcomes that won the fence.
-- name: AttemptsInsert
INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at,
    duration_ms, output, error, created_at)
SELECT a.attempt_id, a.execution_id, a.attempt_number, a.status, a.started_at, a.completed_at,
       a.duration_ms, a.output, a.error, a.completed_at
FROM UNNEST($1::text[], $2::text[], $3::int4[], $4::text[], $5::timestamptz[], $6::timestamptz[],
            $7::int4[], $8::jsonb[], $9::jsonb[])
     AS a(attempt_id, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error);

-- Their log lines.
-- name: LogsInsert
INSERT INTO execution_logs (log_id, execution_id, attempt_number, level, message, logged_at)
SELECT * FROM UNNEST($1::text[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::timestamptz[]);

-- Every job's compare-and-set of its next tick, in one UPDATE: only the scheduler that still
-- sees `tick` as next moves it.
-- name: TicksAdvance
UPDATE jobs AS j SET cron_next_run_at = v.next, cron_last_tick_at = v.last,
    cron_prev_tick_at = j.cron_last_tick_at
FROM UNNEST($1::text[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[]) AS v(job_id, tick, next, last)
WHERE j.job_id = v.job_id AND j.cron_next_run_at = v.tick AND j.status = 'ACTIVE'
RETURNING j.job_id;

-- The endpoints a claim must hold locked first: those with max_concurrency, a rate limit or a
-- circuit not closed (postgres/claim.rs), with their token buckets.
-- name: ClaimLimitedEndpoints
SELECT name, rate_limit_per_sec, rate_limit_burst, rate_tokens, rate_tokens_at FROM endpoints
WHERE max_concurrency IS NOT NULL OR rate_limit_per_sec IS NOT NULL OR circuit_open_until IS NOT NULL
ORDER BY name FOR UPDATE;

-- A batch of audit records (api::audit).
-- name: AuditInsert
INSERT INTO audit_records (audit_id, tenant, key_id, role, method, route, path, status, request_id, at)
SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::int4[], $9::text[], $10::timestamptz[]);

-- A concurrency key admission's keys (keys.sql, KeysAdmit): each key's lock, held to the
-- transaction's end, taken in one order so two admissions never wait on each other in a
-- cycle. (SQLite's writes run one at a time.)
-- name: KeysLock
SELECT pg_advisory_xact_lock(1801812339, k.h)
FROM (SELECT DISTINCT hashtext(CAST(value AS TEXT)) AS h FROM jsonb_array_elements($1) ORDER BY h) AS k;

-- What each key (a JSON array of [endpoint, key] pairs, $1) has room for: its waiting
-- executions due by $2, oldest first, up to the head's `max_in_flight` less the key's
-- executions in flight, become QUEUED; the key's other due ones not yet judged are marked
-- waiting (`key_waiting`), so the promoter's look at new ones passes them over. Each key is
-- probed by its own index scans (LATERAL): a join of the keys with the waiting executions
-- read the whole of idx_executions_key_pending (158 ms for 200 keys among 100,000 waiting,
-- against 10 ms so). Returns how many were admitted.
-- name: KeysAdmit
WITH k AS (
    SELECT DISTINCT value ->> 0 AS endpoint, value ->> 1 AS ckey FROM jsonb_array_elements($1)
),
r AS (
    SELECT k.endpoint, k.ckey,
           head.cap - (SELECT COUNT(*) FROM executions a
                       WHERE a.endpoint = k.endpoint AND a.concurrency_key = k.ckey AND a.concurrency_key IS NOT NULL
                         AND a.status IN ('QUEUED', 'RUNNING', 'RETRYING')) AS room
    FROM k CROSS JOIN LATERAL (
        SELECT x.concurrency_limit AS cap FROM executions x
        WHERE x.endpoint = k.endpoint AND x.concurrency_key = k.ckey AND x.concurrency_key IS NOT NULL
          AND x.status = 'PENDING' AND x.run_at <= $2
        ORDER BY x.run_at, x.execution_id LIMIT 1) AS head
),
admitted AS (
    UPDATE executions SET status = 'QUEUED', key_waiting = FALSE
    WHERE status = 'PENDING' AND execution_id IN (
        SELECT a.execution_id FROM r CROSS JOIN LATERAL (
            SELECT x.execution_id FROM executions x
            WHERE x.endpoint = r.endpoint AND x.concurrency_key = r.ckey AND x.concurrency_key IS NOT NULL
              AND x.status = 'PENDING' AND x.run_at <= $2
            ORDER BY x.run_at, x.execution_id LIMIT GREATEST(r.room, 0)) AS a)
    RETURNING execution_id
),
marked AS (
    UPDATE executions SET key_waiting = TRUE
    WHERE concurrency_key IS NOT NULL AND status = 'PENDING' AND NOT key_waiting AND run_at <= $2
      AND (endpoint, concurrency_key) IN (SELECT endpoint, ckey FROM k)
      AND execution_id NOT IN (SELECT execution_id FROM admitted)
    RETURNING 1
)
SELECT (SELECT COUNT(*) FROM admitted) AS admitted, (SELECT COUNT(*) FROM marked) AS marked;
