-- Installed plugins: each install is the next version under its name; a version's bytes are
-- read only to compile it. Indexes: plugins' primary key (name, version).

-- name: PluginNextVersion
SELECT CAST(COALESCE(MAX(version), 0) + 1 AS BIGINT) FROM plugins WHERE name = $1;

-- name: PluginInsert
INSERT INTO plugins (name, version, sha256, bytes, world, grants, limits, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING name, version, sha256, world, grants, limits, created_at,
          CAST(length(bytes) AS BIGINT) AS size_bytes;

-- name: PluginLatest
SELECT name, version, sha256, world, grants, limits, created_at,
       CAST(length(bytes) AS BIGINT) AS size_bytes
FROM plugins WHERE name = $1 ORDER BY version DESC LIMIT 1;

-- name: PluginVersions
SELECT name, version, sha256, world, grants, limits, created_at,
       CAST(length(bytes) AS BIGINT) AS size_bytes
FROM plugins WHERE name = $1 ORDER BY version;

-- name: PluginBytes
SELECT bytes FROM plugins WHERE name = $1 AND version = $2;

-- Who still uses any version of a plugin: endpoints (as transport, renderer or classifier)
-- and active cron jobs (as schedule). $2: how many to name.
-- name: PluginUsers
SELECT name FROM endpoints WHERE plugin = $1 OR renderer = $1 OR classifier = $1
UNION ALL SELECT job_id FROM jobs WHERE schedule_plugin = $1 AND status = 'ACTIVE'
ORDER BY 1 LIMIT $2;

-- name: PluginDelete
DELETE FROM plugins WHERE name = $1;

-- name: PluginVersionNumbers
SELECT version FROM plugins WHERE name = $1;

-- Who still uses version $2: endpoints and active cron jobs pinned to it, and when it is the
-- plugin's last version ($3), every user of the plugin at all. $4: how many to name.
-- name: PluginVersionUsers
SELECT name FROM endpoints
WHERE (plugin = $1 AND plugin_version = $2)
   OR (classifier = $1 AND classifier_version = $2)
   OR ($3 AND (plugin = $1 OR renderer = $1 OR classifier = $1))
UNION ALL SELECT job_id FROM jobs
WHERE schedule_plugin = $1 AND status = 'ACTIVE' AND (schedule_plugin_version = $2 OR $3)
ORDER BY 1 LIMIT $4;

-- name: PluginVersionDelete
DELETE FROM plugins WHERE name = $1 AND version = $2;
