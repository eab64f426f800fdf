-- Concurrency keys (`flow::concurrency`, `store/keys.rs`): a key's executions in flight are
-- its QUEUED, RUNNING and RETRYING ones; its PENDING ones due wait to be admitted, oldest
-- (`run_at`, then id) first. Keys are passed as a JSON array of [endpoint, key] pairs.
-- Indexes (migration 0077): idx_executions_key_in_flight, idx_executions_key_pending,
-- idx_executions_key_unjudged. PostgreSQL locks the keys first (postgres.sql, KeysLock).

-- What each key has room for: its waiting executions due by $2, in order, up to its
-- `max_in_flight` less its executions in flight, become QUEUED; the others are marked
-- waiting (`key_waiting`), so the promoter's look at new ones passes them over. A row already
-- marked and still waiting is not written again.
-- name: KeysAdmit
WITH k AS (
    SELECT DISTINCT value ->> 0 AS endpoint, value ->> 1 AS ckey FROM /*{json_elements}*/($1)
),
waiting AS (
    SELECT x.execution_id, x.concurrency_limit AS cap, x.key_waiting, k.endpoint, k.ckey,
           ROW_NUMBER() OVER (PARTITION BY k.endpoint, k.ckey ORDER BY x.run_at, x.execution_id) AS place
    FROM k JOIN executions x ON x.endpoint = k.endpoint AND x.concurrency_key = k.ckey
    WHERE x.concurrency_key IS NOT NULL AND x.status = 'PENDING' AND x.run_at <= $2
),
busy AS (
    SELECT k.endpoint, k.ckey,
           (SELECT COUNT(*) FROM executions a
            WHERE a.endpoint = k.endpoint AND a.concurrency_key = k.ckey AND a.concurrency_key IS NOT NULL
              AND a.status IN ('QUEUED', 'RUNNING', 'RETRYING')) AS n
    FROM k
),
decided AS (
    SELECT w.execution_id, w.place <= w.cap - b.n AS admitted, w.key_waiting
    FROM waiting w JOIN busy b ON b.endpoint = w.endpoint AND b.ckey = w.ckey
)
UPDATE executions
SET status = CASE WHEN d.admitted THEN 'QUEUED' ELSE 'PENDING' END,
    key_waiting = NOT d.admitted
FROM decided d
WHERE executions.execution_id = d.execution_id AND (d.admitted OR NOT d.key_waiting)
RETURNING status;

-- Keys of executions due by $1 that no admission has looked at yet: made ahead of their
-- time (delayed jobs, cron ticks) or sent back to wait for a retry.
-- name: KeysUnjudged
SELECT DISTINCT endpoint, concurrency_key AS key FROM executions
WHERE concurrency_key IS NOT NULL AND status = 'PENDING' AND NOT key_waiting AND run_at <= $1
LIMIT $2;

-- Keys with executions waiting and room for one: a key whose execution left its flight by a
-- way that admits nothing itself (a cancel, a lost worker's lease, a delete). The promoter's
-- sweep.
-- name: KeysStarved
SELECT w.endpoint, w.concurrency_key AS key FROM executions w
WHERE w.concurrency_key IS NOT NULL AND w.status = 'PENDING' AND w.key_waiting
GROUP BY w.endpoint, w.concurrency_key
HAVING MIN(w.concurrency_limit) > (
    SELECT COUNT(*) FROM executions a
    WHERE a.endpoint = w.endpoint AND a.concurrency_key = w.concurrency_key AND a.concurrency_key IS NOT NULL
      AND a.status IN ('QUEUED', 'RUNNING', 'RETRYING'))
LIMIT $1;
