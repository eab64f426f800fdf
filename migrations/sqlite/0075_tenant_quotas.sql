-- A tenant's own quotas (`quota::Quotas`, as JSON: each limit set, or absent for the
-- server-wide default). NULL: none of its own.
ALTER TABLE tenants ADD COLUMN quotas TEXT;
