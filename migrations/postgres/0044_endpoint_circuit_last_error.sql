-- The last failed delivery's message (redacted, as stored on its attempt).
ALTER TABLE endpoints ADD COLUMN circuit_last_error TEXT;
