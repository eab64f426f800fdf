-- The cool-down of the circuit's current opening, doubled by each failed probe.
ALTER TABLE endpoints ADD COLUMN circuit_cooldown_ms BIGINT;
