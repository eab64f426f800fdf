-- The first failure since the endpoint's last success (for auto_disable_after).
ALTER TABLE endpoints ADD COLUMN circuit_failing_since TIMESTAMPTZ;
