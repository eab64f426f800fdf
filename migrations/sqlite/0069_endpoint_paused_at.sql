-- An endpoint paused by its owner, as migrations/postgres/0072_endpoint_paused_at.sql.
ALTER TABLE endpoints ADD COLUMN paused_at TEXT;
