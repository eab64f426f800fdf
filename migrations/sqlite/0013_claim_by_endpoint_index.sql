-- The claim shares a worker's slots between endpoints: it finds the endpoints with claimable
-- executions by skipping through this index (one probe per endpoint, however long each
-- one's queue), then takes the earliest due executions of each by a range scan of it.
CREATE INDEX idx_executions_claim_endpoint ON executions (endpoint, run_at) WHERE status IN ('QUEUED', 'RETRYING');
