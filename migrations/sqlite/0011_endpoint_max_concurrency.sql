-- An endpoint may cap how many of its deliveries one worker runs at once (`max_concurrency`);
-- unset, it shares the worker's slots fairly with the other endpoints that have work.
ALTER TABLE endpoints ADD COLUMN max_concurrency INT;
