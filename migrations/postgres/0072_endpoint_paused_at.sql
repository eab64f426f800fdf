-- An endpoint paused by its owner (`POST /endpoints/{name}/pause`) since this time: no execution
-- of it is claimed until `POST /endpoints/{name}/resume`. Its executions wait; cron ticks are
-- still made. (`paused_until` is the receiver's 429 pause, which ends by itself.)
ALTER TABLE endpoints ADD COLUMN paused_at TIMESTAMPTZ;
