-- A plugin's world may now also be `classifier-plugin` or `schedule-plugin`: the check is replaced (0058).
ALTER TABLE plugins DROP CONSTRAINT chk_plugin_world;
