-- Leases replace the "stuck after N seconds" rule: a claim sets lease_expires_at from the
-- database's clock, the worker holding the execution extends it while the attempt runs, and
-- the reclaimer takes only executions whose lease has expired (their worker is gone).
-- One schema change per migration: CockroachDB does not support a column added and used by
-- other DDL or DML in the same transaction.
ALTER TABLE executions ADD COLUMN lease_expires_at TIMESTAMPTZ;
