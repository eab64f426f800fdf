-- The classifier's configuration (JSON), passed to each call.
ALTER TABLE endpoints ADD COLUMN classifier_config JSONB;
