-- The W3C trace context of the request that created a job, copied onto each of its
-- executions: deliveries carry a child of it to receivers (see host/src/trace.rs).
ALTER TABLE jobs ADD COLUMN trace_parent TEXT;
ALTER TABLE executions ADD COLUMN trace_parent TEXT;
