-- When a worker first claimed the execution (its first attempt's start); lateness is
-- claimed_at - scheduled_at.
ALTER TABLE executions ADD COLUMN claimed_at TEXT;
