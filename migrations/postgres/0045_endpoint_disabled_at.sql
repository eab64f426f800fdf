-- Set when the endpoint failed for longer than its auto_disable_after: no claims until enabled.
ALTER TABLE endpoints ADD COLUMN disabled_at TIMESTAMPTZ;
