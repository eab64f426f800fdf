-- Cron ticks are materialized up to TE_CRON_LOOKAHEAD_SEC ahead of their time (as PENDING
-- executions the promoter releases at the tick), so the work at a busy minute boundary is
-- only claiming and delivering. A job then has at most one tick materialized ahead:
-- cron_last_tick_at may be in the future, and the tick before it is kept here so the API
-- can still say when the job last fired.
ALTER TABLE jobs ADD COLUMN cron_prev_tick_at TEXT;
