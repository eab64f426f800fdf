-- The schedule plugin version the job is pinned to (NULL: the newest).
ALTER TABLE jobs ADD COLUMN schedule_plugin_version INT;
