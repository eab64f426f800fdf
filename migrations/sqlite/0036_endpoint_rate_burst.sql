-- The rate limit's bucket: how many deliveries may start at once after a quiet spell.
ALTER TABLE endpoints ADD COLUMN rate_limit_burst INT;
