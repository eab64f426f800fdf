-- As migrations/postgres/0073_trigger_reason_jitter_expiry.sql.
ALTER TABLE executions ADD COLUMN trigger_reason TEXT;
ALTER TABLE jobs ADD COLUMN cron_jitter_ms INTEGER;
ALTER TABLE jobs ADD COLUMN expires_at TEXT;
ALTER TABLE executions ADD COLUMN expires_at TEXT;
