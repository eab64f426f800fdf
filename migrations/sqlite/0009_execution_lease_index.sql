-- The reclaimer's scan: RUNNING executions by lease expiry.
CREATE INDEX idx_executions_lease ON executions (lease_expires_at) WHERE status = 'RUNNING';
