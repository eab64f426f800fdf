-- POST /executions/{id}/retry and /executions/replay: a failed or cancelled execution's new
-- series of attempts is a new execution naming the one it retries (which stays as the record).
ALTER TABLE executions ADD COLUMN retry_of TEXT;
