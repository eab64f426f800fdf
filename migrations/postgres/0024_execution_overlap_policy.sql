-- A cron tick's copy of its job's overlap policy, which the promoter applies when the tick is
-- due; NULL (every other execution) is `allow`.
ALTER TABLE executions ADD COLUMN overlap_policy TEXT;
