-- The bucket's tokens as of rate_tokens_at (claims spend them, time refills them).
ALTER TABLE endpoints ADD COLUMN rate_tokens DOUBLE PRECISION;
