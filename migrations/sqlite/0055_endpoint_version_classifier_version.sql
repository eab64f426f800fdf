-- The classifier plugin version the endpoint is pinned to (NULL: the newest).
ALTER TABLE endpoint_versions ADD COLUMN classifier_version INTEGER;
