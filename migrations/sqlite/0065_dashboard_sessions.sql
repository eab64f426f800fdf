-- Dashboard sessions, as migrations/postgres/0067_dashboard_sessions.sql: the SHA-256 of each
-- session's random token, the hash of the API key that signed in, and when the session ends.
CREATE TABLE dashboard_sessions (
    token_hash    BLOB          NOT NULL,
    key_hash      BLOB          NOT NULL,
    created_at    TEXT          NOT NULL,
    expires_at    TEXT          NOT NULL,
    CONSTRAINT pk_dashboard_sessions PRIMARY KEY (token_hash)
);
CREATE INDEX idx_dashboard_sessions_expires ON dashboard_sessions (expires_at);
