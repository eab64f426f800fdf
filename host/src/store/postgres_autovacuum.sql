-- Autovacuum for a queue's churn, table by table (PostgreSQL only; applied by
-- `PgStore::migrate` after the migrations, on every start, so a changed value here reaches
-- every database: CockroachDB has no autovacuum and refuses these storage parameters).
--
-- Every execution is written three times (queued, claimed, finished) and every write changes
-- `status`, which the partial indexes name, so none is HOT: each leaves a dead row version and
-- index entries behind. At PostgreSQL's defaults (vacuum after 20% of the table is dead,
-- throttled by a 2 ms cost delay) autovacuum ran rarely and slowly on a table hundreds of
-- thousands of rows long: dead tuples piled up to two per live row, the claim and the result
-- write read ever more pages, and waves of 100,000 deliveries slowed from 3,860/s to 957/s by
-- the fourth (the soak in docs/benchmarks.md). Here a vacuum starts after 1% of the table (at
-- least 2,000 rows) is dead, inserts count toward it as well, and runs unthrottled: each pass
-- is short because it comes early.
--
-- The queue's churn is all in `executions_live` (store/partitions.rs: finished executions,
-- attempts and log lines are written once into time partitions that retention drops whole,
-- and partitioned tables take no storage parameters of their own). `jobs` is written once and
-- deleted by the purge, whose dead rows no hot statement reads past: vacuumed at 20% dead
-- (PostgreSQL's default) rather than 1% — at 1% a table as large as the retention's history
-- was vacuumed, every index of it read, every few seconds.
ALTER TABLE executions_live SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE jobs SET (
    autovacuum_vacuum_scale_factor = 0.2,
    autovacuum_vacuum_threshold = 2000,
    autovacuum_vacuum_insert_scale_factor = 0.2,
    autovacuum_vacuum_insert_threshold = 2000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);
