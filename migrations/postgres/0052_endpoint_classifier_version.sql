-- The classifier plugin version the endpoint is pinned to (NULL: the newest).
ALTER TABLE endpoints ADD COLUMN classifier_version INT;
