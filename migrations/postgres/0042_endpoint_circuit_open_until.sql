-- NULL: the circuit is closed; in the future: open (no claims); passed: half-open (one probe).
ALTER TABLE endpoints ADD COLUMN circuit_open_until TIMESTAMPTZ;
