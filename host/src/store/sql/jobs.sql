-- Jobs: each version of a job a row of its own, a cron job's versions linked both ways
-- (previous_version_id, replaced_by_id). A job's executions are written with it (a one-shot
-- job's first fire) or by the scheduler (cron ticks). Indexes: jobs' primary key (job_id);
-- the unique (endpoint, idempotency_key) of keyed jobs; idx_jobs_cron_due (active cron jobs by
-- next tick); the partial index of retired jobs (migration 0066); executions' unique (job_id,
-- idempotency_key) and idx_executions_settled_by_job.

-- A new job, ACTIVE; nothing when its (endpoint, idempotency key) is taken.
-- name: JobInsert
INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, status, version, previous_version_id,
    idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, created_at, endpoint_version, trace_parent, paused_at, overlap_policy, catchup_policy,
    catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version, schedule_spec, cron_jitter_ms, expires_at,
    on_success)
VALUES ($1, $2, $3, $4, 'ACTIVE', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
    $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)
ON CONFLICT (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success;

-- An execution; nothing when one with the same (job, idempotency key) exists. The key is unique
-- among unfinished executions only where the finished ones are partitioned apart (PostgreSQL,
-- `store::partitions`), so the finished are looked at first; the conflict clause names no
-- index, so that whichever unique index the row meets (the table's, or its partition's) turns a
-- concurrent twin away.
-- name: ExecutionInsert
INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input,
    max_attempts, run_at, created_at, endpoint_version, trace_parent, retry_of, overlap_policy,
    scheduled_at, sla_ms, trigger_reason, expires_at, on_success, concurrency_key, concurrency_limit)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $9, $15, $16, $17, $18, $19, $20
WHERE $5 IS NULL OR NOT EXISTS (SELECT 1 FROM executions x WHERE x.job_id = $2 AND x.idempotency_key = $5)
ON CONFLICT DO NOTHING;

-- name: JobGet
SELECT job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success
FROM jobs WHERE job_id = $1;

-- The job that holds an idempotency key.
-- name: JobGetByKey
SELECT job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success
FROM jobs WHERE endpoint = $1 AND idempotency_key = $2;

-- The endpoint, held as a foreign key to it would hold it: not deleted under the jobs about to
-- be written for it.
-- name: EndpointHeldShared
SELECT name FROM endpoints WHERE name = $1/*{lock_shared}*/;

-- The job, held as a foreign key to it would hold it: not deleted under its retry.
-- name: JobHeldShared
SELECT job_id FROM jobs WHERE job_id = $1/*{lock_shared}*/;

-- The job, held for its delete: a tick or retry that wrote an execution before is seen after
-- it; one after finds the job gone.
-- name: JobHeldForDelete
SELECT job_id FROM jobs WHERE job_id = $1/*{lock_exclusive}*/;

-- name: JobDelete
DELETE FROM jobs WHERE job_id = $1;

-- Compare-and-set on ACTIVE: of two concurrent updates, one replaces the job. $2 the time, $3
-- the new version's id.
-- name: JobRetireReplaced
UPDATE jobs SET status = 'RETIRED', retired_at = $2, replaced_by_id = $3
WHERE job_id = $1 AND status = 'ACTIVE' AND trigger_type = 'CRON';

-- name: JobRetire
UPDATE jobs SET status = 'RETIRED', retired_at = $2 WHERE job_id = $1 AND status = 'ACTIVE';

-- A retired cron job stops firing: the tick materialized ahead of its time (still PENDING, or
-- promoted ahead of it) is cancelled. Ticks already due run to completion, as docs/api.md says.
-- name: JobTicksAheadCancel
UPDATE executions SET status = 'CANCELLED', completed_at = $2
WHERE job_id = $1 AND (status = 'PENDING' OR (status = 'QUEUED' AND run_at > $2));

-- name: JobPause
UPDATE jobs SET paused_at = $2, cron_next_run_at = NULL
WHERE job_id = $1 AND status = 'ACTIVE' AND trigger_type = 'CRON' AND paused_at IS NULL;

-- A tick made ahead, or held by `buffer_one`, is not delivered while paused: it is removed (it
-- never ran), so a resume that catches up makes it again. (A tick promoted ahead of its time
-- is QUEUED, not yet due.)
-- name: JobTicksWaitingDelete
DELETE FROM executions WHERE job_id = $1 AND attempt_count = 0
  AND (status = 'PENDING' OR (status = 'QUEUED' AND run_at > $2));

-- name: JobResume
UPDATE jobs SET paused_at = NULL, cron_next_run_at = $2
WHERE job_id = $1 AND status = 'ACTIVE' AND paused_at IS NOT NULL;

-- name: JobExecutionsWaitingCancel
UPDATE executions SET status = 'CANCELLED', completed_at = $2, worker_id = NULL
WHERE job_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING')
RETURNING execution_id;

-- The lineage in one statement: back along previous_version_id to the first version, then
-- forward along replaced_by_id (primary-key lookups both ways), a page at a time in creation
-- order, which is version order. $3, $4: the page's position (NULL for the first page).
-- name: JobVersions
WITH RECURSIVE back(job_id, previous_version_id, depth) AS (
    SELECT job_id, previous_version_id, 0 FROM jobs WHERE job_id = $1
    UNION ALL
    SELECT j.job_id, j.previous_version_id, b.depth + 1
    FROM jobs j JOIN back b ON j.job_id = b.previous_version_id
    WHERE b.depth < 1000000
),
root(job_id) AS (SELECT job_id FROM back ORDER BY depth DESC LIMIT 1),
lineage(job_id, replaced_by_id, depth) AS (
    SELECT j.job_id, j.replaced_by_id, 0 FROM jobs j JOIN root r ON j.job_id = r.job_id
    UNION ALL
    SELECT j.job_id, j.replaced_by_id, l.depth + 1
    FROM jobs j JOIN lineage l ON j.job_id = l.replaced_by_id
    WHERE l.depth < 1000000
)
SELECT job_id, endpoint, endpoint_version, endpoint_type, trigger_type, status, version, previous_version_id,
    replaced_by_id, idempotency_key, input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at,
    cron_next_run_at, cron_last_tick_at, cron_prev_tick_at, created_at, retired_at, trace_parent, paused_at,
    overlap_policy, catchup_policy, catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version,
    schedule_spec, cron_jitter_ms, expires_at, on_success
FROM jobs
WHERE job_id IN (SELECT job_id FROM lineage)
  AND ($3 IS NULL OR (created_at, job_id) > ($3, $4))
ORDER BY created_at, job_id
LIMIT $2;

-- The job's unfinished executions by status: one part per partial index.
-- name: JobStatsActive
SELECT status, COUNT(*) FROM executions
WHERE job_id = $1 AND status IN ('PENDING', 'QUEUED', 'RETRYING')
GROUP BY status
UNION ALL
SELECT status, COUNT(*) FROM executions
WHERE job_id = $1 AND status = 'RUNNING'
GROUP BY status;

-- Counts and the mean in the database; percentiles from a bounded sample (below).
-- name: JobStatsCompleted
SELECT CAST(COUNT(*) AS BIGINT),
       CAST(COALESCE(SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END), 0) AS BIGINT),
       CAST(AVG(duration_ms) AS DOUBLE PRECISION)
FROM executions
WHERE job_id = $1 AND status IN ('SUCCESS', 'FAILED') AND completed_at >= $2;

-- name: JobStatsDurations
SELECT duration_ms FROM executions
WHERE job_id = $1 AND status IN ('SUCCESS', 'FAILED') AND completed_at >= $2
  AND duration_ms IS NOT NULL
ORDER BY completed_at DESC
LIMIT $3;

-- When each recent execution was due and when it was claimed.
-- name: JobStatsClaims
SELECT due, claimed_at FROM (
    SELECT COALESCE(scheduled_at, run_at) AS due, claimed_at FROM executions
    WHERE job_id = $1 AND status <> 'RUNNING' AND claimed_at >= $2
    UNION ALL
    SELECT COALESCE(scheduled_at, run_at) AS due, claimed_at FROM executions
    WHERE job_id = $1 AND status = 'RUNNING' AND claimed_at >= $2
) AS claimed
ORDER BY claimed_at DESC
LIMIT $3;

-- One-shot jobs and retired cron versions created before $1 whose executions are all gone
-- (purged before them), held for their delete, passing over those a retry holds.
-- name: JobsPurgeCandidates
SELECT job_id FROM jobs j
WHERE created_at < $1 AND (trigger_type <> 'CRON' OR status = 'RETIRED')
  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status <> 'RUNNING')
  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.job_id = j.job_id AND e.status = 'RUNNING')
ORDER BY created_at LIMIT $2/*{lock_skip_locked}*/;
