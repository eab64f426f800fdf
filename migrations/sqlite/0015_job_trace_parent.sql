-- The W3C trace context of the request that created a job version: its deliveries carry a
-- child of it to receivers (see host/src/trace.rs).
ALTER TABLE jobs ADD COLUMN trace_parent TEXT;
