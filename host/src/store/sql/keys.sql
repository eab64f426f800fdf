-- Concurrency keys (`flow::concurrency`, `store/keys.rs`): a key's executions in flight are
-- its QUEUED, RUNNING and RETRYING ones; its PENDING ones due wait to be admitted, oldest
-- (`run_at`, then id) first. The admissions themselves are each backend's (postgres.sql:
-- KeysLock, KeysAdmit; sqlite.sql: KeyRoom, KeyAdmit, KeyMark). Indexes (migration 0077):
-- idx_executions_key_in_flight, idx_executions_key_pending, idx_executions_key_unjudged.

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
