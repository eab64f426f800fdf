-- Each execution's copy of its job's trace context: each attempt's span is a child of it.
ALTER TABLE executions ADD COLUMN trace_parent TEXT;
