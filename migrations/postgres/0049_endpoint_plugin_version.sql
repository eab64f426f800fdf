-- A PLUGIN endpoint pinned to one version of its plugin (NULL: the newest).
ALTER TABLE endpoints ADD COLUMN plugin_version INT;
