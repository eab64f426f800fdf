-- The brief's pickup index (status, run_at) on claimable rows has the same predicate as
-- idx_executions_claim (0002), which serves the claim's ORDER BY run_at directly; no query
-- uses the pickup index any more, and every execution that becomes claimable paid for
-- maintaining both. (Measured by the cron-load benchmark: index maintenance is most of the
-- database's work at a minute boundary.)
DROP INDEX IF EXISTS idx_executions_pickup;
