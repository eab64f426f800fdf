-- The classifier's configuration (JSON), passed to each call.
ALTER TABLE endpoint_versions ADD COLUMN classifier_config JSONB;
