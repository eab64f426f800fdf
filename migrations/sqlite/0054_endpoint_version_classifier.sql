-- The classifier plugin judging this endpoint's answers (NULL: none).
ALTER TABLE endpoint_versions ADD COLUMN classifier TEXT;
