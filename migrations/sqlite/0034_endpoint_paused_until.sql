-- A receiver that answers 429 with Retry-After pauses its whole endpoint until then: no
-- execution of it is claimed before this time.
ALTER TABLE endpoints ADD COLUMN paused_until TEXT;
