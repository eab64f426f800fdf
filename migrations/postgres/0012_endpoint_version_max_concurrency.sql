-- Kept with each endpoint version, like the rest of the definition (one schema change per
-- migration, for CockroachDB).
ALTER TABLE endpoint_versions ADD COLUMN max_concurrency INT;
