-- The audit trail: one row for each request that could change something (any method but GET,
-- HEAD and OPTIONS) made with a valid key, whatever its answer. `key_id` and `role` are NULL for
-- an operator key (TE_API_KEYS). `route` is the route's pattern (`/jobs/{id}/pause`), `path`
-- the path asked (at most 1,000 characters); no query string, body or header is kept. Rows are
-- written in batches shortly after each answer (api::audit) and deleted past TE_RETENTION.
CREATE TABLE audit_records (
    audit_id      TEXT          NOT NULL,
    tenant        TEXT          NOT NULL,
    key_id        TEXT,
    role          TEXT,
    method        TEXT          NOT NULL,
    route         TEXT          NOT NULL,
    path          TEXT          NOT NULL,
    status        INTEGER       NOT NULL,
    request_id    TEXT          NOT NULL,
    at            TIMESTAMPTZ   NOT NULL,
    CONSTRAINT pk_audit_records PRIMARY KEY (audit_id)
);
-- A tenant's records a page at a time (`GET /audit`); the purge finds the oldest by `at`.
CREATE INDEX idx_audit_records_by_tenant ON audit_records (tenant, at, audit_id);
CREATE INDEX idx_audit_records_at ON audit_records (at);
