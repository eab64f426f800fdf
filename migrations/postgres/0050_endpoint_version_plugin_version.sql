ALTER TABLE endpoint_versions ADD COLUMN plugin_version INT;
