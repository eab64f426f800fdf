-- A job's own failure callback endpoint, in place of its endpoint's.
ALTER TABLE jobs ADD COLUMN on_failure TEXT;
