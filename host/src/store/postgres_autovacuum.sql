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
--
-- The queue's partition is never truncated by a vacuum (`vacuum_truncate`, PostgreSQL 12+, for
-- the vacuumer's VACUUM and autovacuum alike). Its empty pages at the end are the ones the next
-- burst of executions is written to: to give them back, a vacuum waits for an ACCESS EXCLUSIVE
-- lock (up to 5 s, in the soak 19 s of every 4 minutes, the queue's next vacuum waiting behind
-- it), holds it while it reads the pages back, every claim and insert waiting meanwhile, and
-- the inserts after it extend the table again, one relation-extension lock at a time.
ALTER TABLE executions_live SET (
    vacuum_truncate = false,
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

-- No statistics of the queue's `status`. What an ANALYZE of `executions_live` finds is gone a
-- second later: one taken while a backlog waited (every row QUEUED, none RUNNING) told the
-- planner that no row is RUNNING, so the result write and the lease renewal, which find their
-- rows by id among the RUNNING ones, read the whole of `idx_executions_running` for each batch
-- — every execution running on every worker, and every dead entry not yet vacuumed — instead
-- of probing the primary key: in the scaling run (docs/benchmarks.md) one drain in six ran at a
-- quarter of the rate, PostgreSQL spending 0.5-1.1 ms of CPU per execution instead of 0.07.
-- Without statistics the planner takes a status to be one value in 200, a plan that holds at
-- any size of the queue.
ALTER TABLE executions_live ALTER COLUMN status SET STATISTICS 0;
