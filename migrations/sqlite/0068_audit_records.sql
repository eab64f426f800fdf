-- The audit trail, as migrations/postgres/0071_audit_records.sql.
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
    at            TEXT          NOT NULL,
    CONSTRAINT pk_audit_records PRIMARY KEY (audit_id)
);
CREATE INDEX idx_audit_records_by_tenant ON audit_records (tenant, at, audit_id);
CREATE INDEX idx_audit_records_at ON audit_records (at);
