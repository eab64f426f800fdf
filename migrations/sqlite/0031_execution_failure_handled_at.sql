-- When the failure notifier dealt with a FAILED execution (made its callback job, or found
-- none to make): each failure is handled once.
ALTER TABLE executions ADD COLUMN failure_handled_at TEXT;
