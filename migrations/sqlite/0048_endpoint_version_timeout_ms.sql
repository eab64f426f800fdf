ALTER TABLE endpoint_versions ADD COLUMN timeout_ms INTEGER;
