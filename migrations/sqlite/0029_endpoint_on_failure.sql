-- The endpoint that hears of this endpoint's failed executions (a failure callback).
ALTER TABLE endpoints ADD COLUMN on_failure TEXT;
