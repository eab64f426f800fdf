-- An endpoint's rate limit: deliveries per second (a token bucket), across all workers.
ALTER TABLE endpoints ADD COLUMN rate_limit_per_sec REAL;
