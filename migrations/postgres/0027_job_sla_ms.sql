-- A job's SLA: its executions should start within this many milliseconds of their time.
ALTER TABLE jobs ADD COLUMN sla_ms INT;
