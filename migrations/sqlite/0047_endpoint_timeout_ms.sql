-- The endpoint's delivery timeout, for every endpoint type (NULL: the spec's, or the default).
ALTER TABLE endpoints ADD COLUMN timeout_ms INTEGER;
