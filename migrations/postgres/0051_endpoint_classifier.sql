-- The classifier plugin judging this endpoint's answers (NULL: none).
ALTER TABLE endpoints ADD COLUMN classifier TEXT;
