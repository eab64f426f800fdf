-- An endpoint's circuit-breaker settings (flow::circuit::CircuitPolicy); NULL: the defaults.
ALTER TABLE endpoints ADD COLUMN circuit_policy JSONB;
