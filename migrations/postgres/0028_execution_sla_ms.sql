-- Each execution's copy of its job's SLA, so sla_met is known from the execution alone.
ALTER TABLE executions ADD COLUMN sla_ms INT;
