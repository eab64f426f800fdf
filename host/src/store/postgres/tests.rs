use super::*;

/// A database of its own on the test server (`TE_TEST_POSTGRES_URL`), migrated.
struct FreshDatabase {
    admin_pool: PgPool,
    name: String,
    store: PgStore,
}

impl FreshDatabase {
    async fn migrated() -> Self {
        let admin = std::env::var("TE_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        let name = format!("te_test_{}", uuid::Uuid::new_v4().simple());
        let admin_pool = PgPool::connect(&admin).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin_pool).await.unwrap();
        let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
        let store = PgStore::connect(&url, 2).await.unwrap();
        super::super::Store::migrate(&store).await.unwrap();
        Self { admin_pool, name, store }
    }

    async fn drop(self) {
        self.store.pool.close().await;
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let _ = sqlx::query(&drop).execute(&self.admin_pool).await;
    }
}

/// The claim's plan stays on its indexes when the queue's partition has the statistics it
/// has after waves of work: counted while it was nearly empty and bloated (a vacuum then
/// finds a row or two in hundreds of pages), then refilled. Plans made for those
/// statistics read every queued row of an endpoint to take 25 of it (a bitmap scan and a
/// sort), or all 50,000 once for each row taken (the update joined to the rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_reads_what_it_takes_whatever_the_statistics_say() {
    let db = FreshDatabase::migrated().await;
    let store = &db.store;
    let queue = |prefix: &'static str| {
        format!(
            "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, max_attempts, run_at, created_at)
             SELECT 'exec_{prefix}' || lpad(g::text, 8, '0'), 'job_' || g,
                    CASE WHEN g % 1000 = 0 THEN 'b' ELSE 'a' END, 'HTTP', 'QUEUED', '{{}}', 3,
                    now() - INTERVAL '1 minute' + g * INTERVAL '1 ms', now()
             FROM generate_series(1, 50000) AS g"
        )
    };
    // One statement each: several in one string run as one transaction, and VACUUM cannot.
    // Waves of a queue filling and emptying, each vacuumed with a row or a few left behind.
    for sql in [
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) VALUES ('a', 'HTTP', '{}', '{}'), ('b', 'HTTP', '{}', '{}')"
            .to_owned(),
        queue("b"),
        "DELETE FROM executions WHERE execution_id NOT LIKE '%000'".to_owned(),
        "VACUUM ANALYZE executions_live".to_owned(),
        queue("c"),
        "DELETE FROM executions WHERE execution_id NOT IN ('exec_c00049000', 'exec_b00050000')".to_owned(),
        "VACUUM ANALYZE executions_live".to_owned(),
        queue("d"),
    ] {
        sqlx::raw_sql(&sql).execute(&store.pool).await.unwrap();
    }
    let (pages, rows): (i32, f32) =
        sqlx::query_as("SELECT relpages, reltuples FROM pg_class WHERE relname = 'executions_live'")
            .fetch_one(&store.pool)
            .await
            .unwrap();
    assert!(pages > 100 && rows < 10.0, "the statistics of a bloated, nearly empty table: {pages} pages, {rows} rows");

    // The claim as a worker makes it: its transaction's settings, its generic plan.
    let mut tx = store.begin_claim().await.unwrap();
    sqlx::raw_sql(&format!(
        "PREPARE claim(text, timestamptz, int, bigint, int, text[], int4[], text[], int4[], timestamptz) AS {}",
        claim_sql()
    ))
    .execute(&mut *tx)
    .await
    .unwrap();
    let (plan,): (serde_json::Value,) = sqlx::query_as(
        "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON)
         EXECUTE claim('w', now(), 50, 30000, 200, ARRAY['a'], ARRAY[150], ARRAY[]::text[], ARRAY[]::int4[], now())",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    db.drop().await;

    // Every row every node read from the table, times the times it ran.
    fn read(node: &serde_json::Value) -> f64 {
        let own = if node["Relation Name"] == "executions_live" {
            node["Actual Rows"].as_f64().unwrap_or(0.0) * node["Actual Loops"].as_f64().unwrap_or(1.0)
                + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0)
        } else {
            0.0
        };
        own + node["Plans"].as_array().map_or(0.0, |plans| plans.iter().map(read).sum())
    }
    let top = &plan[0]["Plan"];
    let taken = top["Actual Rows"].as_f64().unwrap();
    assert_eq!(taken, 50.0, "{plan}");
    let rows = read(top);
    assert!(rows < 1_000.0, "the claim of 50 read {rows} rows of the queue's partition: {plan:#}");
}

/// The result write probes the primary key for each execution of its batch, even when the
/// statistics were taken while a backlog waited and no row was RUNNING. With the statistics
/// of `status` that ANALYZE then keeps, PostgreSQL read the whole RUNNING index for each
/// batch instead (every running execution and every dead entry: a quarter of the drain's
/// rate in one scaling run in six). `postgres_autovacuum.sql` keeps no statistics of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_write_probes_by_id_whatever_the_statistics_say() {
    let db = FreshDatabase::migrated().await;
    let store = &db.store;
    for sql in [
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) VALUES ('a', 'HTTP', '{}', '{}')",
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_' || lpad(g::text, 8, '0'), 'job_' || g, 'a', 'HTTP', 'QUEUED', '{}', 3, now(), now()
         FROM generate_series(1, 50000) AS g",
        // The backlog analyzed before any of it runs, as the vacuumer may.
        "ANALYZE executions_live",
        "UPDATE executions SET status = 'RUNNING', attempt_count = 1
         WHERE status = 'QUEUED' AND execution_id <= 'exec_00002000'",
    ] {
        sqlx::raw_sql(sql).execute(&store.pool).await.unwrap();
    }
    let mut tx = store.begin_write().await.unwrap();
    sqlx::raw_sql(&format!(
        "PREPARE result(text[], int4[], text[], jsonb[], timestamptz[], int4[], timestamptz[]) AS {}",
        super::sql::RESULT_WRITE
    ))
    .execute(&mut *tx)
    .await
    .unwrap();
    let (plan,): (serde_json::Value,) = sqlx::query_as(
        "EXPLAIN (FORMAT JSON) EXECUTE result(ARRAY['exec_00000001', 'exec_00000002'], ARRAY[1, 1],
             ARRAY['SUCCESS', 'SUCCESS'], ARRAY['{}', '{}']::jsonb[], ARRAY[now(), now()], ARRAY[1, 1],
             ARRAY[NULL, NULL]::timestamptz[])",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    tx.rollback().await.unwrap();
    db.drop().await;

    // Every scan of the queue's partition in the plan, by the index it reads and its condition.
    fn scans(node: &serde_json::Value, found: &mut Vec<(String, String)>) {
        if node["Relation Name"] == "executions_live" {
            let index = node["Index Name"].as_str().unwrap_or("(none)").to_owned();
            found.push((index, node["Index Cond"].as_str().unwrap_or("").to_owned()));
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            scans(child, found);
        }
    }
    let mut found = Vec::new();
    scans(&plan[0]["Plan"], &mut found);
    assert!(!found.is_empty(), "{plan:#}");
    for (index, condition) in &found {
        assert_eq!(index, "pk_executions_live", "{plan:#}");
        assert!(condition.contains("execution_id"), "a probe by id: {condition}");
    }
}

/// The jobs of an expired span are deleted by probes of `pk_jobs`, however many jobs there are
/// and whatever the statistics say: here they were taken when `jobs` held ten rows, as when a
/// service is new. Joined to its chunk as a table, the planner read every job for each
/// statement of 1,000 (50 s each in the short soak, holding back every vacuum meanwhile).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_purge_probes_by_id_whatever_the_statistics_say() {
    let db = FreshDatabase::migrated().await;
    let store = &db.store;
    let jobs = |from: i32, to: i32| {
        format!(
            "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at)
             SELECT 'job_' || lpad(g::text, 8, '0'), 'a', 'HTTP', 'IMMEDIATE', now() - INTERVAL '1 hour'
             FROM generate_series({from}, {to}) AS g"
        )
    };
    for sql in [
        "INSERT INTO endpoints (name, endpoint_type, spec, retry_policy) VALUES ('a', 'HTTP', '{}', '{}')".to_owned(),
        jobs(1, 10),
        "ANALYZE jobs".to_owned(),
        jobs(11, 100_000),
    ] {
        sqlx::raw_sql(&sql).execute(&store.pool).await.unwrap();
    }
    let mut tx = store.pool.begin().await.unwrap();
    sqlx::raw_sql(super::super::partitions::JOBS_PURGE_PLANS).execute(&mut *tx).await.unwrap();
    let explain = format!("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {}", super::super::partitions::JOBS_DELETE);
    let ids: Vec<String> = (50_001..=51_000).map(|n| format!("job_{n:08}")).collect();
    let (plan,): (serde_json::Value,) = sqlx::query_as(&explain)
        .bind(&ids)
        .bind(None::<chrono::DateTime<chrono::Utc>>)
        .bind(chrono::Utc::now())
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    db.drop().await;

    // Every scan of `jobs`: its index, its condition, and the rows it read.
    fn scans(node: &serde_json::Value, found: &mut Vec<(String, String, f64)>) {
        let scan = node["Node Type"].as_str().is_some_and(|t| t.ends_with("Scan"));
        if scan && node["Relation Name"] == "jobs" {
            let index = node["Index Name"].as_str().unwrap_or("(none)").to_owned();
            let rows = node["Actual Rows"].as_f64().unwrap_or(0.0) * node["Actual Loops"].as_f64().unwrap_or(1.0)
                + node["Rows Removed by Filter"].as_f64().unwrap_or(0.0);
            found.push((index, node["Index Cond"].as_str().unwrap_or("").to_owned(), rows));
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            scans(child, found);
        }
    }
    let mut found = Vec::new();
    scans(&plan[0]["Plan"], &mut found);
    assert_eq!(found.len(), 1, "{plan:#}");
    let (index, condition, rows) = &found[0];
    assert_eq!(index, "pk_jobs", "{plan:#}");
    assert!(condition.contains("job_id"), "a probe by id: {condition}");
    assert_eq!(*rows, 1_000.0, "the chunk's jobs, and no others: {plan:#}");
}
