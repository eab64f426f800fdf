-- Leases replace the "stuck after N seconds" rule: a claim sets lease_expires_at, the worker
-- holding the execution extends it while the attempt runs, and the reclaimer takes only
-- executions whose lease has expired (their worker is gone). Same numbering as PostgreSQL's
-- migrations, which need one schema change per file for CockroachDB.
ALTER TABLE executions ADD COLUMN lease_expires_at TEXT;
