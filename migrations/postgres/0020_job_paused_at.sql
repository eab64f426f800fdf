-- POST /jobs/{id}/pause: a paused CRON job keeps its place (ACTIVE) but makes no ticks until
-- it is resumed; its next tick is cleared while paused.
ALTER TABLE jobs ADD COLUMN paused_at TIMESTAMPTZ;
