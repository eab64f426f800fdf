-- Dashboard sessions: signing in makes a random token, kept by the browser in its cookie; only
-- the token's SHA-256 is stored, with the hash of the API key that signed in and when the
-- session ends. Every API process reads the same rows, so a session works on each, and
-- signing out (deleting the row) ends it on each. A session whose key is no longer accepted
-- is refused when used.
CREATE TABLE dashboard_sessions (
    token_hash    BYTEA         NOT NULL,
    key_hash      BYTEA         NOT NULL,
    created_at    TIMESTAMPTZ   NOT NULL,
    expires_at    TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_dashboard_sessions PRIMARY KEY (token_hash)
);
-- Expired sessions are deleted by age.
CREATE INDEX idx_dashboard_sessions_expires ON dashboard_sessions (expires_at);
