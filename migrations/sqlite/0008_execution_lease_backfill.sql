-- Executions RUNNING at the upgrade were claimed under the old rule (reclaimed 300 s after
-- they started): give them the lease that rule implied. Timestamps are fixed-width UTC text.
UPDATE executions
SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%S', started_at, '+300 seconds') || substr(started_at, 20)
WHERE status = 'RUNNING' AND lease_expires_at IS NULL;
