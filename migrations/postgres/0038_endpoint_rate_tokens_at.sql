ALTER TABLE endpoints ADD COLUMN rate_tokens_at TIMESTAMPTZ;
