-- The reclaimer's scan: RUNNING executions by lease expiry (replaces the index by started_at,
-- which no query reads any more).
CREATE INDEX idx_executions_lease ON executions (lease_expires_at) WHERE status = 'RUNNING';
