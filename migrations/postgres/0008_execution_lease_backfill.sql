-- Executions RUNNING at the upgrade were claimed under the old rule (reclaimed 300 s after
-- they started): give them the lease that rule implied.
UPDATE executions SET lease_expires_at = started_at + INTERVAL '300 seconds'
WHERE status = 'RUNNING' AND lease_expires_at IS NULL;
