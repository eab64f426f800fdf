-- A claim writes fewer index entries. An UPDATE that changes `status` (which partial indexes
-- name) is never HOT, so it adds an entry to every index whose predicate the new row version
-- meets: a claim (QUEUED → RUNNING) added one to pk_executions, idx_executions_by_job,
-- idx_executions_created and idx_executions_lease — four B-tree insertions for a row that is
-- RUNNING for the few milliseconds of a delivery, and whose result adds three more.
--
-- The two list indexes now leave RUNNING rows out, and the running rows get one small index of
-- their own, by job, that also serves the reclaimer (it scans the whole of it: the RUNNING rows
-- are at most the slots of the running workers). A claim adds two entries (the primary key and
-- idx_executions_running) instead of four. Every read that can meet a RUNNING row asks the two
-- parts separately and merges them (store::common, `settled_or_running`): measured in
-- docs/benchmarks.md, "Side by side with graphile-worker".
CREATE INDEX idx_executions_settled_created ON executions (created_at, execution_id) WHERE status <> 'RUNNING';
CREATE INDEX idx_executions_settled_by_job ON executions (job_id, created_at) WHERE status <> 'RUNNING';
CREATE INDEX idx_executions_running ON executions (job_id, lease_expires_at) WHERE status = 'RUNNING';
DROP INDEX IF EXISTS idx_executions_created;
DROP INDEX IF EXISTS idx_executions_by_job;
DROP INDEX IF EXISTS idx_executions_lease;
