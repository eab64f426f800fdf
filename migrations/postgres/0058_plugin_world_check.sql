-- The worlds a plugin may implement.
ALTER TABLE plugins ADD CONSTRAINT chk_plugin_world CHECK (world IN ('transport-plugin', 'renderer-plugin', 'classifier-plugin', 'schedule-plugin'));
