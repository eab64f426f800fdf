-- A created job costs PostgreSQL less (docs/benchmarks.md, "The engine: drain, create, …").
--
-- fk_jobs_endpoint and fk_executions_job checked every new row with a query of their own: a
-- lookup and a FOR KEY SHARE lock of the referenced row, per row: without them PostgreSQL
-- writes a batch of new jobs 30% faster (pgbench, one transaction of 1,000 jobs and their
-- executions: ~61,000 jobs/s with both, ~79,000 without). The store keeps what they guaranteed with one lock per
-- write instead (store::postgres, "What the foreign keys were"):
-- - a write of new jobs locks each of its endpoints FOR KEY SHARE once, in the same statement,
--   and writes no job whose endpoint is gone (reported to the client as such);
-- - an execution is only written for a job locked in the same transaction: its own create, a
--   cron tick's UPDATE of the job, or a retry that locks the job FOR KEY SHARE;
-- - deleting an endpoint or a job first locks it FOR UPDATE (and an endpoint's jobs), so a
--   write that waits on it finds it gone, and every check the delete makes after the lock sees
--   every write that went before.
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS fk_jobs_endpoint;
ALTER TABLE executions DROP CONSTRAINT IF EXISTS fk_executions_job;

-- idx_jobs_status (status, created_at) put every new job in a second list of all jobs: nearly
-- every job is ACTIVE (only a replaced version, or a job whose waiting executions were
-- cancelled, is RETIRED). `GET /jobs?status=ACTIVE` reads idx_jobs_created and passes over the
-- retired ones; `?status=RETIRED` reads this index of the retired alone, which a new job never
-- enters (pgbench as above: ~5% more jobs/s without idx_jobs_status alone).
CREATE INDEX idx_jobs_retired ON jobs (created_at, job_id) WHERE status = 'RETIRED';
DROP INDEX IF EXISTS idx_jobs_status;
