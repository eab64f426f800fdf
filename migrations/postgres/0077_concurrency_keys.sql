-- Concurrency keys (`flow::concurrency`): an endpoint's `concurrency` ({key, max_in_flight,
-- ordering}), and on each execution of such an endpoint its key as rendered from its input
-- and the endpoint's `max_in_flight` when it was made. `key_waiting`: a due execution its key
-- has not admitted yet (it waits for one of the key's executions in flight to finish), so the
-- promoter's look at new due executions does not read it again.
ALTER TABLE endpoints ADD COLUMN concurrency JSONB;
ALTER TABLE executions ADD COLUMN concurrency_key TEXT;
ALTER TABLE executions ADD COLUMN concurrency_limit INT;
ALTER TABLE executions ADD COLUMN key_waiting BOOLEAN NOT NULL DEFAULT FALSE;

-- A key's executions in flight, counted at each admission. Partial: executions without a key
-- (nearly all) never enter it, so the claim's and the result's writes of those are unchanged.
CREATE INDEX IF NOT EXISTS idx_executions_key_in_flight ON executions (endpoint, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'RETRYING');
-- A key's PENDING executions in the order they are admitted.
CREATE INDEX IF NOT EXISTS idx_executions_key_pending ON executions (endpoint, concurrency_key, run_at, execution_id)
    WHERE concurrency_key IS NOT NULL AND status = 'PENDING';
-- Keyed executions due that no admission has judged yet, by key (the promoter's look at them,
-- and an admission's marking of its keys' new ones).
CREATE INDEX IF NOT EXISTS idx_executions_key_unjudged ON executions (endpoint, concurrency_key, run_at)
    WHERE concurrency_key IS NOT NULL AND status = 'PENDING' AND NOT key_waiting;
-- The promoter's PENDING executions without a key: waiting keyed ones (due, and possibly
-- many) are no longer read past by each promotion.
CREATE INDEX IF NOT EXISTS idx_executions_pending_unkeyed ON executions (run_at)
    WHERE status = 'PENDING' AND concurrency_key IS NULL;
