-- Regions: each process's heartbeat per component, and which regions are marked alive
-- (written and read; not yet acted on). Indexes: region_heartbeats' primary key
-- (region, component).

-- name: HeartbeatWrite
INSERT INTO region_heartbeats (region, component, last_beat_at, status, metadata)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (region, component)
DO UPDATE SET last_beat_at = excluded.last_beat_at, status = excluded.status, metadata = excluded.metadata;

-- name: RegionsAlive
SELECT region FROM region_status WHERE alive ORDER BY region;
