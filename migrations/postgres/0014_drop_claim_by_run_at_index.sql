-- The claim no longer takes executions in one global run_at order (it goes endpoint by
-- endpoint through idx_executions_claim_endpoint), so nothing reads this index; dropping it
-- keeps one claim index to maintain per state change, as before.
DROP INDEX IF EXISTS idx_executions_claim;
