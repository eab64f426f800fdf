-- A plugin's world may now also be `classifier-plugin` or `schedule-plugin`. SQLite cannot alter a CHECK
-- constraint, so the table is rebuilt with the new one (no table refers to plugins).
CREATE TABLE plugins_new (
    name          TEXT          NOT NULL,
    version       INT           NOT NULL,
    sha256        TEXT          NOT NULL,
    bytes         BLOB          NOT NULL,
    world         TEXT          NOT NULL,
    grants        TEXT          NOT NULL,
    limits        TEXT          NOT NULL,
    created_at    TEXT          NOT NULL DEFAULT ((strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z')),
    CONSTRAINT pk_plugins PRIMARY KEY (name, version),
    CONSTRAINT chk_plugin_world CHECK (world IN ('transport-plugin', 'renderer-plugin', 'classifier-plugin', 'schedule-plugin'))
);
INSERT INTO plugins_new (name, version, sha256, bytes, world, grants, limits, created_at)
    SELECT name, version, sha256, bytes, world, grants, limits, created_at FROM plugins;
DROP TABLE plugins;
ALTER TABLE plugins_new RENAME TO plugins;
CREATE INDEX idx_plugins_page ON plugins (created_at, name);
