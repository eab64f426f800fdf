-- Why an execution was made, where it was not its job's own time: `manual`
-- (`POST /jobs/{id}/trigger`), `backfill` (`POST /jobs/{id}/backfill`), `retry`. NULL is the
-- job's own time (a one-shot fire, a cron tick), or a retry made before this column (its
-- `retry_of` says so): the hot inserts of new jobs and ticks leave it unset.
ALTER TABLE executions ADD COLUMN trigger_reason TEXT;

-- A CRON job's ticks each fire up to this many milliseconds after their time, by an offset
-- fixed per tick (`scheduler::jitter`), so that many jobs on one schedule do not all fire at
-- the same instant. NULL: no jitter.
ALTER TABLE jobs ADD COLUMN cron_jitter_ms INTEGER;

-- A one-shot job's `expires_at`: its execution, if not started by then, fails unsent with
-- DEADLINE_EXCEEDED. Kept on the execution too, where the worker that takes it reads it.
ALTER TABLE jobs ADD COLUMN expires_at TIMESTAMPTZ;
ALTER TABLE executions ADD COLUMN expires_at TIMESTAMPTZ;
