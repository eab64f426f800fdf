-- Who may call the API: the hashes of the API keys the service generated for itself, and the
-- dashboard's sign-in sessions (each by the SHA-256 of its token). Indexes: api_keys' primary
-- key; dashboard_sessions' primary key (token_hash).

-- name: ApiKeyHashes
SELECT key_hash FROM api_keys ORDER BY created_at;

-- name: ApiKeyInsert
INSERT INTO api_keys (key_hash, created_at) VALUES ($1, $2);

-- name: DashboardSessionsEndedDelete
DELETE FROM dashboard_sessions WHERE expires_at <= $1;

-- name: DashboardSessionInsert
INSERT INTO dashboard_sessions (token_hash, key_hash, created_at, expires_at) VALUES ($1, $2, $3, $4);

-- name: DashboardSessionKey
SELECT key_hash FROM dashboard_sessions WHERE token_hash = $1 AND expires_at > $2;

-- name: DashboardSessionDelete
DELETE FROM dashboard_sessions WHERE token_hash = $1;
