-- The schedule plugin's spec for this job (JSON), passed to each call.
ALTER TABLE jobs ADD COLUMN schedule_spec JSONB;
