-- The schedule plugin computing a CRON job's ticks, in place of its cron expression (NULL: cron).
ALTER TABLE jobs ADD COLUMN schedule_plugin TEXT;
