-- When an execution was meant to fire: its first run_at (run_at moves to each retry's time).
-- Rows from before this column read it as NULL, and the API falls back to run_at.
ALTER TABLE executions ADD COLUMN scheduled_at TEXT;
