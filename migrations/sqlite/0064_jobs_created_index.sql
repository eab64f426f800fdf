-- The job list without a filter (GET /jobs, the dashboard's jobs page) pages by
-- (created_at, job_id), and the retention purge finds finished jobs by age; only the filtered
-- lists had an index in that order (idx_jobs_status, idx_jobs_endpoint). Without one, SQLite
-- sorted the whole table into a temporary B-tree for every page: ~18 ms at 100,000 jobs,
-- against well under a millisecond with this index.
CREATE INDEX idx_jobs_created ON jobs (created_at, job_id);
