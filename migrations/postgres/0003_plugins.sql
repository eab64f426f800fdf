-- WebAssembly plugins: every installed version of each, with its bytes (so every worker of a
-- cluster can load it), the world it implements, its outbound HTTP grants and its limits.
CREATE TABLE plugins (
    name          TEXT          NOT NULL,
    version       INT           NOT NULL,
    sha256        TEXT          NOT NULL,
    bytes         BYTEA         NOT NULL,
    world         TEXT          NOT NULL,
    grants        JSONB         NOT NULL,
    limits        JSONB         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CONSTRAINT pk_plugins PRIMARY KEY (name, version),
    CONSTRAINT chk_plugin_world CHECK (world IN ('transport-plugin', 'renderer-plugin'))
);
CREATE INDEX idx_plugins_page ON plugins (created_at, name);

-- An endpoint of type PLUGIN names its transport plugin; any endpoint may name a renderer
-- plugin in place of the built-in renderer.
ALTER TABLE endpoints ADD COLUMN plugin TEXT;
ALTER TABLE endpoints ADD COLUMN renderer TEXT;
ALTER TABLE endpoints DROP CONSTRAINT chk_endpoint_type;
ALTER TABLE endpoints ADD CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM', 'PLUGIN'));
ALTER TABLE jobs DROP CONSTRAINT chk_endpoint_type;
ALTER TABLE jobs ADD CONSTRAINT chk_endpoint_type CHECK (endpoint_type IN ('HTTP', 'KAFKA', 'REDIS_STREAM', 'PLUGIN'));
