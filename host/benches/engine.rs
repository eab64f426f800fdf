//! The engine benchmark: the real `taskexec` binary (release build) on PostgreSQL and on
//! SQLite, delivering to an in-process HTTP receiver that answers 200 at once. Databases,
//! servers, the receiver and the API client are the e2e tests' harness (`tests/e2e/support`).
//!
//!     cargo bench -p taskexec --bench engine
//!
//! Scenarios (sizes can be lowered with the environment for a quick run):
//! - drain: BENCH_DRAIN (50,000) queued executions, one worker process: executions/second;
//! - create: BENCH_CREATE (10,000) `POST /jobs` IMMEDIATE from 32 keep-alive clients: jobs/second;
//!   the server has every role (it delivers what is created meanwhile) unless BENCH_CREATE_ROLES
//!   says otherwise (`api`: the API alone, as when workers run in processes of their own);
//! - batch: the same number of jobs by `POST /jobs/batch`, 1,000 a request, from 4 clients
//!   (BENCH_BATCH_CLIENTS): jobs/second, against single creates (BENCH_CREATE_ROLES as for
//!   create);
//! - fire latency: BENCH_DELAYED (1,000) DELAYED jobs with run_at spread over 30 s: delay from
//!   run_at to the receiver seeing the request, p50/p99/max;
//! - purge (PostgreSQL): BENCH_PURGE_ROWS (1,000,000) finished executions, each with an attempt,
//!   older than TE_RETENTION; then a drain of BENCH_PURGE_DRAIN (20,000) by one worker and
//!   scheduler process, with the retention purge on and off: executions/second both ways, and
//!   how many old rows the purge deleted meanwhile;
//! - cron load: BENCH_CRON (10,000) per-minute cron jobs: after each minute boundary, how long
//!   until the last tick is delivered (two minutes observed);
//! - cron-mixed (only when named): BENCH_CRON_MIXED (100,000) cron jobs of mixed schedules (2%
//!   every minute, 8% every five minutes, 30% hourly, 60% daily), made by `POST /jobs/batch`:
//!   over BENCH_CRON_MINUTES (3) minute boundaries and a five-minute one, how late ticks arrive;
//! - side-by-side (PostgreSQL, only when named; `scripts/bench` runs it): BENCH_SIDE_BY_SIDE
//!   (20,000) IMMEDIATE jobs created through the API, each an HTTP POST to nginx in its own
//!   process, drained by a `worker,scheduler` process with the default settings; then
//!   graphile-worker (npm, `benches/graphile/`) with the same jobs and receiver, at concurrency
//!   24 (BENCH_GRAPHILE_CONCURRENCY) with its defaults and tuned: jobs/second each, and taskexec's ratio to each.
//!   BENCH_SIDE_BY_SIDE_SLOTS sets the worker's TE_WORKER_MAX_CONCURRENT; BENCH_PEERS=0 leaves
//!   graphile-worker out (an A/B of taskexec builds, with TE_TEST_BINARY); BENCH_TIMELINE=1
//!   prints taskexec's claims and completions per 100 ms. Each contender's clock starts after `sync`.
//!
//! - claim (only when named): claim latency as the finished history grows: BENCH_CLAIM_ROWS
//!   (1,000,000) finished executions added in steps (none, a tenth, all), after 40 claims of
//!   the empty table, as a new installation's first claims are (a plan PostgreSQL caches then
//!   must still hold as the table grows); at each size 5,000
//!   queued executions of two endpoints are claimed 50 at a time through the store, as a
//!   worker claims: p50/p99 per claim, and the ratio of the largest size's p50 to the empty one's.
//! - rss (PostgreSQL, only when named): BENCH_RSS_IN_FLIGHT (10,000) deliveries held open at once
//!   by a slow receiver (each answered after 30 s), one worker process with that many slots:
//!   the worker's resident memory (VmRSS, and its peak VmHWM) once all of them are in flight.
//! - history (PostgreSQL, only when named): the claim and the history's reads (`GET
//!   /executions`, a job's executions, the dashboard's overview) over BENCH_HISTORY
//!   (10,000,000) finished executions with their attempts and logs (see `engine/history.rs`).
//! - soak (PostgreSQL, only when named; `scripts/bench soak`): millions of executions in
//!   windows, as history piles up (see `engine/soak.rs`).
//! - scaling (PostgreSQL, only when named; `scripts/bench scaling`): BENCH_SCALING (100,000)
//!   jobs through two `api` processes, drained by 1, 2 and 4 `worker` processes beside 1-3
//!   `scheduler` processes: rate, CPU per kind of process, connections (see `engine/scaling.rs`).
//! - keys (PostgreSQL, only when named; `scripts/bench keys`): a drain of BENCH_KEYS (10,000)
//!   concurrency keys × BENCH_KEYS_EACH (10) with `max_in_flight: 1`, against the same jobs
//!   without a key (see `engine/keys.rs`);
//! - convert (PostgreSQL, only when named): a database of BENCH_CONVERT (1,000,000) finished
//!   executions written before history was partitioned, and the migrate that partitions it:
//!   how long it takes (see `engine/history.rs`).
//!
//! BENCH_BACKENDS (postgres,sqlite), BENCH_SCENARIOS (drain,create,batch,latency,cron; purge only
//! when named), BENCH_WORKER_SLOTS
//! (the worker's TE_WORKER_MAX_CONCURRENT in drain and cron load, 400), BENCH_TE_LOG and
//! BENCH_SERVER_LOG (the server's log level, and a path prefix to keep each scenario's server log at),
//! TE_TEST_POSTGRES_URL (postgres://postgres@127.0.0.1:5432/postgres), and BENCH_JSON
//! (bench-results/engine.json) adjust a run. Figures go to docs/benchmarks.md by hand.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

// The e2e tests' harness; the benchmark uses part of it.
#[allow(dead_code, unused_imports)]
#[path = "../../tests/e2e/support/mod.rs"]
mod support;

use support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

#[path = "engine/history.rs"]
mod history;
#[path = "engine/keys.rs"]
mod keys;
#[path = "engine/scaling.rs"]
mod scaling;
#[path = "engine/soak.rs"]
mod soak;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A server for a measurement: the service's own defaults (pool size included) rather than the
/// tests' small pool and debug logs; BENCH_TE_LOG raises the log level.
async fn start_server(db: &TestDb, roles: &str, extra: &[(&str, &str)]) -> Server {
    // A process with the API is ready when it listens; one without, when its role runs.
    let ready = if roles.contains("api") {
        "Listening."
    } else if roles.contains("worker") {
        "Worker running."
    } else {
        "Scheduler running."
    };
    let log = std::env::var("BENCH_TE_LOG").unwrap_or_else(|_| "warn,taskexec::cli=info".into());
    let mut options = ServerOptions::new().roles(roles, ready).env("TE_LOG", &log).without("TE_DB_POOL_SIZE");
    for (key, value) in extra {
        options = options.env(key, value);
    }
    Server::start_with(db, options).await
}

/// BENCH_SERVER_LOG names a file to keep a server's log in.
fn keep_log(server: &Server, scenario: &str) {
    if let Ok(path) = std::env::var("BENCH_SERVER_LOG") {
        let text = server.output_text();
        let path = format!("{path}.{scenario}");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
}

async fn post(api: &Client, path: &str, body: &Value) {
    let r = api.post(path, body).await;
    assert!(r.status.is_success(), "POST {path}: {} {}", r.status, r.text);
}

async fn register(api: &Client, receiver: &Receiver) {
    post(api, "/configs", &json!({"name": "bench", "values": {"url": format!("{}/ok/hook", receiver.base_url)}})).await;
    post(api, "/endpoints", &json!({"name": "bench", "type": "HTTP", "config": "bench", "spec": {
        "url": "{{config.url}}", "method": "POST", "body_template": {"n": "{{input.n}}", "run_at": "{{input.run_at}}"}
    }})).await;
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

// ---------- scenarios ----------

/// Queue `n` executions straight into the database (as a burst of API creates would leave
/// them), then start one worker and time until every one has succeeded.
async fn drain(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    register(&api, &receiver).await;
    let generator = match backend {
        Backend::Postgres => format!("SELECT g FROM generate_series(1, {n}) AS g"),
        Backend::Sqlite => {
            format!("WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {n}) SELECT g FROM s")
        }
    };
    let now = "'2026-01-01T00:00:00.000000Z'";
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, idempotency_key, input, created_at)
         SELECT 'job_bench_' || g, 'bench', 'HTTP', 'IMMEDIATE', 'k' || g, '{{\"n\": 1, \"run_at\": \"-\"}}', {now} FROM ({generator}) AS t;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_bench_' || g, 'job_bench_' || g, 'bench', 'HTTP', 'k' || g, 'QUEUED', '{{\"n\": 1, \"run_at\": \"-\"}}', 1, {now}, {now} FROM ({generator}) AS t;"
    ))
    .await;
    let started = std::time::Instant::now();
    let worker = start_server(&db, "worker", &[("TE_WORKER_MAX_CONCURRENT", &worker_slots())]).await;
    eventually("the drain", Duration::from_secs(900), || async { receiver.count() >= n }).await;
    eventually("every execution recorded", Duration::from_secs(300), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == n as i64
    })
    .await;
    let seconds = started.elapsed().as_secs_f64();
    keep_log(&worker, "drain-worker");
    let rss_mib = memory_kib(worker.pid(), "VmRSS") as f64 / 1024.0;
    json!({"executions": n, "seconds": round2(seconds), "executions_per_second": (n as f64 / seconds).round(),
           "worker_rss_mib": round2(rss_mib)})
}

/// `old` finished executions (an attempt each) older than the retention, then `n` queued ones
/// drained by a worker and scheduler process with the purge on (TE_RETENTION=30d) or off (0).
async fn drain_beside_purge(old: usize, n: usize, purging: bool) -> Value {
    let db = TestDb::new(Backend::Postgres).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    register(&api, &receiver).await;
    let input = "'{\"n\": 1, \"run_at\": \"-\"}'";
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, input, created_at)
         VALUES ('job_old', 'bench', 'HTTP', 'CRON', {input}, now() - interval '40 days');
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
             max_attempts, run_at, started_at, completed_at, duration_ms, created_at)
         SELECT 'exec_old_' || g, 'job_old', 'bench', 'HTTP', 'SUCCESS', {input}, '{{\"status_code\": 200}}', 1, 1,
             now() - interval '40 days', now() - interval '40 days', now() - interval '40 days', 3, now() - interval '40 days'
         FROM generate_series(1, {old}) AS g;
         INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, created_at)
         SELECT 'att_old_' || g, 'exec_old_' || g, 1, 'SUCCESS', now() - interval '40 days', now() - interval '40 days', 3,
             '{{\"status_code\": 200}}', now() - interval '40 days'
         FROM generate_series(1, {old}) AS g;
         INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, idempotency_key, input, created_at)
         SELECT 'job_new_' || g, 'bench', 'HTTP', 'IMMEDIATE', 'k' || g, {input}, now() FROM generate_series(1, {n}) AS g;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_new_' || g, 'job_new_' || g, 'bench', 'HTTP', 'k' || g, 'QUEUED', {input}, 1, now(), now()
         FROM generate_series(1, {n}) AS g;
         ANALYZE;"
    ))
    .await;
    let retention = if purging { "30d" } else { "0" };
    let started = std::time::Instant::now();
    let env = [
        ("TE_WORKER_MAX_CONCURRENT", worker_slots()),
        ("TE_RETENTION", retention.into()),
        ("TE_PURGE_INTERVAL_SEC", "1".into()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let process = start_server(&db, "worker,scheduler", &env).await;
    eventually("the drain", Duration::from_secs(900), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS' AND execution_id LIKE 'exec_new_%'").await
            == n as i64
    })
    .await;
    let seconds = started.elapsed().as_secs_f64();
    let left = db.scalar("SELECT COUNT(*) FROM executions WHERE execution_id LIKE 'exec_old_%'").await;
    keep_log(&process, "purge");
    json!({"purging": purging, "old_rows": old, "old_rows_purged_meanwhile": old as i64 - left, "executions": n,
           "seconds": round2(seconds), "executions_per_second": (n as f64 / seconds).round()})
}

/// `n` creates from 32 concurrent keep-alive clients against a server with every role.
async fn create(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, &create_roles(), &[]).await;
    let api = Arc::new(server.client());
    register(&api, &receiver).await;
    let clients = 32;
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for i in (c..n).step_by(clients) {
                    let t = std::time::Instant::now();
                    post(&api, "/jobs", &json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("c{i}"), "input": {"n": i, "run_at": "-"}})).await;
                    latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let seconds = started.elapsed().as_secs_f64();
    keep_log(&server, "create");
    latencies.sort_by(f64::total_cmp);
    json!({"jobs": n, "clients": clients, "jobs_per_second": (n as f64 / seconds).round(),
           "p50_ms": round2(percentile(&latencies, 0.5)), "p99_ms": round2(percentile(&latencies, 0.99))})
}

/// The roles of the process that takes creates: `BENCH_CREATE_ROLES`, every role by default.
fn create_roles() -> String {
    std::env::var("BENCH_CREATE_ROLES").unwrap_or_else(|_| "api,scheduler,worker".into())
}

/// `POST /jobs/batch` of a body made beforehand; how many jobs the answer says were created.
async fn post_batch(http: &reqwest::Client, url: &str, body: Vec<u8>) -> u64 {
    #[derive(serde::Deserialize)]
    struct Counts {
        created: u64,
    }
    let response = http
        .post(url)
        .bearer_auth(support::server::API_KEY)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the request is sent");
    let status = response.status();
    let text = response.text().await.expect("a body");
    assert!(status.is_success(), "POST /jobs/batch: {status} {text}");
    serde_json::from_str::<Counts>(&text).unwrap_or_else(|e| panic!("a batch's answer ({e}): {text}")).created
}

/// `n` creates in batches of 1,000 from 4 concurrent clients against a server with every role
/// (`BENCH_CREATE_ROLES=api`: the API alone, as for single creates).
async fn create_batched(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, &create_roles(), &[]).await;
    let api = Arc::new(server.client());
    register(&api, &receiver).await;
    let (clients, size) = (env_usize("BENCH_BATCH_CLIENTS", 4), 1000);
    // The load generator shares the two cores with the service: its request bodies are made
    // before the clock starts, and an answer is read only for its count of created jobs (made
    // and parsed as `serde_json::Value`, 1,000 jobs each way, they took ~12% of the machine;
    // `perf record -a`, 2026-11-27).
    let bodies: Vec<(usize, Vec<u8>)> = (0..n)
        .collect::<Vec<_>>()
        .chunks(size)
        .map(|batch| {
            let jobs: Vec<Value> = batch
                .iter()
                .map(|i| json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("b{i}"), "input": {"n": i, "run_at": "-"}}))
                .collect();
            (batch.len(), serde_json::to_vec(&json!({ "jobs": jobs })).unwrap())
        })
        .collect();
    let (http, url) = (reqwest::Client::new(), format!("{}/jobs/batch", server.base_url));
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (http, url) = (http.clone(), url.clone());
            let mine: Vec<(usize, Vec<u8>)> = bodies.iter().skip(c).step_by(clients).cloned().collect();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for (jobs, body) in mine {
                    let t = std::time::Instant::now();
                    assert_eq!(post_batch(&http, &url, body).await, jobs as u64, "every job of the batch created");
                    latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let seconds = started.elapsed().as_secs_f64();
    keep_log(&server, "batch");
    latencies.sort_by(f64::total_cmp);
    json!({"jobs": n, "batch": size, "clients": clients, "jobs_per_second": (n as f64 / seconds).round(),
           "p50_batch_ms": round2(percentile(&latencies, 0.5)), "p99_batch_ms": round2(percentile(&latencies, 0.99))})
}

/// `n` DELAYED jobs with run_at spread over 30 s; the delay from run_at to arrival.
async fn fire_latency(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api,scheduler,worker", &[]).await;
    let api = server.client();
    register(&api, &receiver).await;
    let base = Utc::now() + chrono::Duration::seconds(5);
    for i in 0..n {
        let run_at = base + chrono::Duration::microseconds((30_000_000 * i / n) as i64);
        post(
            &api,
            "/jobs",
            &json!({"endpoint": "bench", "trigger": "DELAYED", "idempotency_key": format!("d{i}"), "run_at": run_at,
            "input": {"n": i, "run_at": run_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}}),
        )
        .await;
    }
    eventually("every delayed job", Duration::from_secs(120), || async { receiver.count() >= n }).await;
    keep_log(&server, "latency");
    let mut delays: Vec<f64> = receiver
        .received()
        .iter()
        .map(|r| {
            let run_at: DateTime<Utc> = r.json()["run_at"].as_str().unwrap().parse().unwrap();
            (r.at - run_at).num_microseconds().unwrap() as f64 / 1000.0
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    json!({"jobs": n, "p50_ms": round2(percentile(&delays, 0.5)), "p99_ms": round2(percentile(&delays, 0.99)),
           "max_ms": round2(*delays.last().unwrap()), "min_ms": round2(delays[0])})
}

/// `n` per-minute cron jobs; for two minute boundaries, the time from the boundary until the
/// last of that minute's ticks reached the receiver.
async fn cron_load(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api,scheduler,worker", &[("TE_WORKER_MAX_CONCURRENT", &worker_slots())]).await;
    let api = Arc::new(server.client());
    register(&api, &receiver).await;
    let tasks: Vec<_> = (0..16)
        .map(|c| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (c..n).step_by(16) {
                    post(
                        &api,
                        "/jobs",
                        &json!({"endpoint": "bench", "trigger": "CRON", "cron": "* * * * *", "timezone": "UTC",
                        "input": {"n": i, "run_at": "{{tick}}"}}),
                    )
                    .await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let created = Utc::now();
    let first_minute = created.timestamp() / 60 + 1;
    let mut results = Vec::new();
    for minute in first_minute..first_minute + 2 {
        let boundary = DateTime::<Utc>::from_timestamp(minute * 60, 0).unwrap();
        let after = ticks_after(&receiver, boundary, n).await;
        let last = after.last().copied();
        let first = after.first().copied();
        let median = after.get(after.len() / 2).copied();
        // Ticks are made ahead of their minute: none may reach the receiver before it.
        let early = receiver
            .arrivals()
            .iter()
            .filter(|at| **at < boundary && **at >= boundary - chrono::Duration::seconds(5))
            .count();
        results.push(json!({"minute": boundary.to_rfc3339(), "delivered": after.len(), "last_tick_after_s": last,
            "first_tick_after_s": first, "median_tick_after_s": median, "delivered_early": early}));
    }
    keep_log(&server, "cron");
    json!({"cron_jobs": n, "minutes": results})
}

/// Once `due` requests have arrived in the minute from `boundary` (or 55 s have passed), how many
/// seconds after `boundary` each arrived, in order.
async fn ticks_after(receiver: &Receiver, boundary: DateTime<Utc>, due: usize) -> Vec<f64> {
    let until = boundary + chrono::Duration::seconds(55);
    let in_minute = || receiver.arrivals().into_iter().filter(move |at| *at >= boundary && *at < until);
    eventually("the minute's ticks", Duration::from_secs(180), || async {
        in_minute().count() >= due || Utc::now() > until
    })
    .await;
    let mut after: Vec<f64> = in_minute().map(|t| (t - boundary).num_milliseconds() as f64 / 1000.0).collect();
    after.sort_by(f64::total_cmp);
    after
}

/// The schedule of the `i`th of the mixed cron jobs: 2% every minute, 8% every five minutes, 30%
/// hourly and 60% daily, the hourly and daily ones spread evenly over their minutes.
fn mixed_schedule(i: usize) -> String {
    match i % 50 {
        0 => "* * * * *".to_owned(),
        1..=4 => "*/5 * * * *".to_owned(),
        5..=19 => format!("{} * * * *", (i / 50) % 60),
        _ => format!("{} {} * * *", (i / 50) % 60, (i / 3000) % 24),
    }
}

/// Whether the 5-field cron `expression` (as [`mixed_schedule`] writes them) fires at `at`.
fn fires_at(expression: &str, at: DateTime<Utc>) -> bool {
    use chrono::Timelike;
    let fields: Vec<&str> = expression.split(' ').collect();
    let matches = |field: &str, value: u32| match field.strip_prefix("*/") {
        Some(step) => value.is_multiple_of(step.parse::<u32>().unwrap()),
        None => field == "*" || field.parse::<u32>().unwrap() == value,
    };
    matches(fields[0], at.minute()) && matches(fields[1], at.hour())
}

/// `n` cron jobs of mixed schedules ([`mixed_schedule`]), created through `POST /jobs/batch`:
/// over the next `BENCH_CRON_MINUTES` (3) minute boundaries and at least one five-minute one, how
/// late the ticks reach the receiver after their minute (every schedule here fires on one).
async fn cron_mixed(backend: Backend, n: usize) -> Value {
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api,scheduler,worker", &[("TE_WORKER_MAX_CONCURRENT", &worker_slots())]).await;
    let api = Arc::new(server.client());
    register(&api, &receiver).await;
    let started = std::time::Instant::now();
    let batches: Vec<Vec<usize>> = (0..n).collect::<Vec<_>>().chunks(1000).map(<[usize]>::to_vec).collect();
    let tasks: Vec<_> = (0..4)
        .map(|c| {
            let api = api.clone();
            let mine: Vec<Vec<usize>> = batches.iter().skip(c).step_by(4).cloned().collect();
            tokio::spawn(async move {
                for batch in mine {
                    let jobs: Vec<Value> = batch
                        .iter()
                        .map(|i| json!({"endpoint": "bench", "trigger": "CRON", "cron": mixed_schedule(*i), "timezone": "UTC",
                                        "input": {"n": i, "run_at": "{{tick}}"}}))
                        .collect();
                    let answer = api.post("/jobs/batch", &json!({ "jobs": jobs })).await;
                    assert_eq!(answer.body["created"].as_u64(), Some(batch.len() as u64), "{}", answer.text);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let create_seconds = started.elapsed().as_secs_f64();
    let first_minute = Utc::now().timestamp() / 60 + 1;
    // At least BENCH_CRON_MINUTES boundaries, and on to the first five-minute one (the busiest).
    let minutes = env_usize("BENCH_CRON_MINUTES", 3) as i64;
    let mut last_minute = first_minute + minutes - 1;
    while !(first_minute..=last_minute).any(|m| m % 5 == 0) {
        last_minute += 1;
    }
    let mut results = Vec::new();
    for minute in first_minute..=last_minute {
        let boundary = DateTime::<Utc>::from_timestamp(minute * 60, 0).unwrap();
        let due = (0..n).filter(|i| fires_at(&mixed_schedule(*i), boundary)).count();
        let after = ticks_after(&receiver, boundary, due).await;
        results.push(json!({"minute": boundary.to_rfc3339(), "due": due, "delivered": after.len(),
            "last_tick_after_s": after.last(), "p99_tick_after_s": after.get(after.len() * 99 / 100)}));
    }
    keep_log(&server, "cron-mixed");
    json!({"cron_jobs": n, "create_seconds": round2(create_seconds), "minutes": results})
}

/// nginx (Debian's nginx-light) answering 200 to everything on 127.0.0.1, one worker process:
/// a receiver in another process, as a user's is. Stopped when dropped.
struct Nginx {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start() -> Self {
        let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("nginx is not installed: scripts/bench installs nginx-light");
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let d = dir.path().display();
        let conf = format!(
            "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log warn;
             events {{ worker_connections 8192; }}
             http {{
                 access_log off; keepalive_requests 1000000; keepalive_timeout 120s;
                 client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
                 uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
                 server {{ listen 127.0.0.1:{port}; location / {{ return 200 'OK'; }} }}
             }}"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = std::process::Command::new(binary)
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-p")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx starts");
        let url = format!("http://127.0.0.1:{port}/hook");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "nginx did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, url, _dir: dir }
    }
}

impl Nginx {
    /// nginx's master process and its worker process (which does the work).
    fn pids(&self) -> Vec<u32> {
        let master = self.child.id();
        let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children")).unwrap_or_default();
        std::iter::once(master).chain(children.split_whitespace().filter_map(|p| p.parse().ok())).collect()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master, which stops its worker (SIGKILL would leave the worker behind).
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// 1 while an execution waits or runs, else 0: from the partial indexes on those statuses.
const UNFINISHED: &str = "SELECT CASE WHEN EXISTS (SELECT 1 FROM executions WHERE status IN ('QUEUED', 'RETRYING'))
                                OR EXISTS (SELECT 1 FROM executions WHERE status = 'RUNNING') THEN 1::int8 ELSE 0::int8 END";

/// Until `unfinished` (a query answering 1 while the drain goes on) answers 0, for at most
/// 900 s; then every one of the `n` executions has succeeded.
async fn drained(db: &TestDb, unfinished: &str, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(900);
    while db.scalar(unfinished).await != 0 {
        assert!(std::time::Instant::now() < deadline, "the drain did not finish in 900 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let succeeded = db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await;
    assert_eq!(succeeded, n as i64, "every execution of the drain succeeds");
}

/// Side by side, on one PostgreSQL and one receiver (nginx, another process): `n` IMMEDIATE
/// jobs created through the API (`POST /jobs/batch`) before a `worker,scheduler` process starts
/// with the default settings, timed until every execution is SUCCESS; then graphile-worker with
/// the same `n` jobs at concurrency 24, with its defaults and tuned. The ratio is the point.
async fn side_by_side(n: usize) -> Value {
    let nginx = Nginx::start();
    let server_url = side_by_side_server_url();
    let db = TestDb::postgres_on(&server_url).await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    post(
        &api,
        "/endpoints",
        &json!({"name": "bench", "type": "HTTP", "spec": {
            "url": nginx.url, "method": "POST", "body_template": {"n": "{{input.n}}"}
        }}),
    )
    .await;
    for from in (0..n).step_by(1000) {
        let jobs: Vec<Value> = (from..n.min(from + 1000))
            .map(|i| json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("k{i}"), "input": {"n": i}}))
            .collect();
        post(&api, "/jobs/batch", &json!({ "jobs": jobs })).await;
    }
    settle();
    let started_ms = chrono::Utc::now().timestamp_millis();
    // The service's own defaults, unless BENCH_SIDE_BY_SIDE_SLOTS sets TE_WORKER_MAX_CONCURRENT.
    let slots = std::env::var("BENCH_SIDE_BY_SIDE_SLOTS").ok();
    let pool = std::env::var("BENCH_SIDE_BY_SIDE_POOL").ok();
    let env: Vec<(&str, &str)> = slots
        .iter()
        .map(|s| ("TE_WORKER_MAX_CONCURRENT", s.as_str()))
        .chain(pool.iter().map(|p| ("TE_DB_POOL_SIZE", p.as_str())))
        .collect();
    let worker = start_server(&db, "worker,scheduler", &env).await;
    // Polled four times a second, asking only whether an execution still waits or runs: the
    // partial indexes on those statuses answer without reading finished rows. A COUNT of the
    // SUCCESS rows read the whole table (28 ms of database time a poll at 60,000 executions,
    // pg_stat_statements: 5% of the machine, taken from what it timed). The drain ends when
    // its last execution was recorded complete, whenever the poll sees it.
    drained(&db, UNFINISHED, n).await;
    let last_ms = db.scalar("SELECT (EXTRACT(EPOCH FROM MAX(completed_at)) * 1000)::bigint FROM executions").await;
    let seconds = (last_ms - started_ms) as f64 / 1000.0;
    if std::env::var("BENCH_TIMELINE").is_ok() {
        timeline(&db, started_ms, last_ms).await;
    }
    keep_log(&worker, "side-by-side");
    drop(worker);
    let taskexec = n as f64 / seconds;

    let mut peers = serde_json::Map::new();
    let with_peers = std::env::var("BENCH_PEERS").map_or(true, |v| v != "0");
    for tuned in [false, true].into_iter().filter(|_| with_peers) {
        let peer_db = TestDb::postgres_on(&server_url).await;
        // Node resolves an ES module's imports beside the script: run a copy where
        // scripts/bench installed graphile-worker (BENCH_NODE_DIR, target/bench-node).
        let dir = std::env::var("BENCH_NODE_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-node"));
        let script = dir.join("bench.mjs");
        std::fs::copy(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/graphile/bench.mjs"), &script)
            .expect("copying the graphile-worker script (scripts/bench makes target/bench-node)");
        let out = std::process::Command::new("node")
            .arg(&script)
            .env("DATABASE_URL", &peer_db.url)
            .env("RECEIVER_URL", &nginx.url)
            .env("N", n.to_string())
            .env("CONCURRENCY", std::env::var("BENCH_GRAPHILE_CONCURRENCY").unwrap_or_else(|_| "24".into()))
            .env("TUNED", if tuned { "1" } else { "0" })
            .output()
            .expect("node runs (scripts/bench installs graphile-worker)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| {
            panic!("graphile-worker: {}{}", stdout, String::from_utf8_lossy(&out.stderr));
        });
        let result: Value = serde_json::from_str(line).unwrap();
        let rate = result["jobs_per_second"].as_f64().unwrap();
        peers.insert(
            if tuned { "graphile_tuned" } else { "graphile_default" }.into(),
            json!({"result": result, "taskexec_ratio": round2(taskexec / rate)}),
        );
    }
    json!({"jobs": n, "receiver": "nginx (1 worker process)", "taskexec_worker_slots": slots.as_deref().unwrap_or("default"),
           "postgres_connections": if server_url.contains("sslmode=disable") { "plain" } else { "as the URL says" },
           "taskexec_seconds": round2(seconds),
           "taskexec_per_second": taskexec.round(), "peers": peers})
}

/// `BENCH_TIMELINE=1`: when the drain's first claim came, and how many executions completed
/// in each 100 ms from the clock's start (to stderr), to see the ramp-up and the steady rate.
async fn timeline(db: &TestDb, started_ms: i64, last_ms: i64) {
    let first_claim = db.scalar("SELECT (EXTRACT(EPOCH FROM MIN(claimed_at)) * 1000)::bigint FROM executions").await;
    eprintln!("timeline: first claim at +{} ms; claimed and completed per 100 ms:", first_claim - started_ms);
    let within = |column: &str, from: i64| {
        format!(
            "SELECT COUNT(*) FROM executions
             WHERE {column} >= to_timestamp({from}::float8 / 1000) AND {column} < to_timestamp({}::float8 / 1000)",
            from + 100
        )
    };
    for from in (started_ms..=last_ms).step_by(100) {
        let claimed = db.scalar(&within("claimed_at", from)).await;
        let done = db.scalar(&within("completed_at", from)).await;
        eprintln!("timeline: +{} ms {claimed} {done}", from - started_ms);
    }
}

/// Write the kernel's dirty pages out before a contender's clock starts (`sync`; bench.mjs
/// does the same). What the run before left behind — the WAL and the pages of its dropped
/// database, gigabytes after graphile-worker's runs — was otherwise written back during the
/// next drain, on the same two cores: taskexec right after graphile-worker drained 20,000 at
/// 7,388 · 8,081 · 8,183/s, right after itself at 9,259 · 9,843 · 11,242/s (docs/benchmarks.md).
fn settle() {
    let synced = std::process::Command::new("sync").status().map(|s| s.success()).unwrap_or(false);
    assert!(synced, "sync (coreutils) flushes the page cache before the clock starts");
}

/// The PostgreSQL server both contenders use, connected to the same way. graphile-worker's
/// driver (node-postgres) connects without TLS unless its URL asks; sqlx, like libpq, prefers
/// TLS whenever the server offers it (Debian's PostgreSQL does, with its snakeoil
/// certificate). Left to their defaults, taskexec paid for TLS on every statement and
/// graphile-worker did not (9,567 against 10,463 jobs/s for taskexec alone, docs/benchmarks.md).
/// So a URL that does not say adds `sslmode=disable`; one that says is used as it is.
fn side_by_side_server_url() -> String {
    let url = support::db::admin_url();
    if url.contains("sslmode=") {
        url
    } else if url.contains('?') {
        format!("{url}&sslmode=disable")
    } else {
        format!("{url}?sslmode=disable")
    }
}

/// Claim latency with `rows` finished executions behind the queue, against none (see the
/// module's list of scenarios).
async fn claim_latency(backend: Backend, rows: usize) -> Value {
    use taskexec::store::DatabaseLocation;
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    register(&api, &receiver).await;
    post(&api, "/endpoints", &json!({"name": "bench-b", "type": "HTTP", "spec": {"url": format!("{}/ok/b", receiver.base_url), "method": "POST"}})).await;
    let store = taskexec::store::connect(&DatabaseLocation::parse(Some(&db.url)).unwrap(), 4).await.unwrap();
    let series = |from: usize, to: usize| match backend {
        Backend::Postgres => format!("SELECT g FROM generate_series({from}, {to}) AS g"),
        Backend::Sqlite => format!(
            "WITH RECURSIVE s(g) AS (SELECT {from} UNION ALL SELECT g + 1 FROM s WHERE g < {to}) SELECT g FROM s"
        ),
    };
    let then = "'2026-01-01T00:00:00.000000Z'";
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, input, created_at)
         VALUES ('job_history', 'bench', 'HTTP', 'CRON', '{{}}', {then})"
    ))
    .await;
    // A new installation's workers claim from an empty table first, and whatever the database
    // plans then (PostgreSQL's cached generic plans) must still hold as the table grows.
    for _ in 0..40 {
        assert!(store.execution_claim(&bench_claim()).await.unwrap().is_empty());
    }
    let mut steps = Vec::new();
    let mut have = 0;
    for (round, size) in [0, rows / 10, rows].into_iter().enumerate() {
        if size > have {
            db.execute(&format!(
                "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
                     max_attempts, run_at, started_at, completed_at, duration_ms, created_at)
                 SELECT 'exec_history_' || g, 'job_history', CASE WHEN g % 2 = 0 THEN 'bench' ELSE 'bench-b' END, 'HTTP',
                     CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'SUCCESS' END, '{{}}', '{{\"status_code\": 200}}', 1, 1,
                     {then}, {then}, {then}, 3, {then}
                 FROM ({}) AS t",
                series(have + 1, size)
            ))
            .await;
            have = size;
        }
        let mut step = queued_claim_round(&db, &*store, backend, round).await;
        step["finished_rows"] = json!(size);
        steps.push(step);
    }
    let ratio = steps[2]["p50_ms"].as_f64().unwrap_or(f64::NAN) / steps[0]["p50_ms"].as_f64().unwrap_or(f64::NAN);
    json!({"steps": steps, "p50_ratio_largest_to_empty": round2(ratio)})
}

/// A claim as the claim scenarios make it: 50 at a time, now, with no share held.
fn bench_claim() -> taskexec::store::ClaimParams {
    let now = Utc::now();
    taskexec::store::ClaimParams {
        worker_id: "bench-claims".into(),
        now,
        due_by: now,
        limit: 50,
        lease: Duration::from_secs(300),
        shares: taskexec::store::EndpointShares { held: Vec::new(), ceiling: 1_000 },
    }
}

/// One round of the claim scenario: 5,000 QUEUED executions of `bench` and `bench-b` (their
/// jobs too) claimed 50 at a time through `store`, as a worker claims, until a claim finds
/// none; then finished, as the worker would leave them. p50 and p99 per claim.
async fn queued_claim_round(db: &TestDb, store: &dyn taskexec::store::Store, backend: Backend, round: usize) -> Value {
    let then = "'2026-01-01T00:00:00.000000Z'";
    let queued = 5_000;
    let generator = match backend {
        Backend::Postgres => format!("SELECT g FROM generate_series(1, {queued}) AS g"),
        Backend::Sqlite => format!(
            "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {queued}) SELECT g FROM s"
        ),
    };
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, idempotency_key, input, created_at)
         SELECT 'job_claim_{round}_' || g, CASE WHEN g % 2 = 0 THEN 'bench' ELSE 'bench-b' END, 'HTTP', 'IMMEDIATE', 'k{round}_' || g, '{{}}', {then}
         FROM ({generator}) AS t;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_claim_{round}_' || g, 'job_claim_{round}_' || g, CASE WHEN g % 2 = 0 THEN 'bench' ELSE 'bench-b' END, 'HTTP',
             'k{round}_' || g, 'QUEUED', '{{}}', 1, {then}, {then}
         FROM ({generator}) AS t;
         ANALYZE"
    ))
    .await;
    let mut latencies = Vec::new();
    loop {
        let claim = bench_claim();
        let started = std::time::Instant::now();
        let claimed = store.execution_claim(&claim).await.unwrap();
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        if claimed.is_empty() {
            break;
        }
    }
    db.execute(&format!(
        "UPDATE executions SET status = 'SUCCESS', completed_at = {then} WHERE execution_id LIKE 'exec_claim_{round}_%'"
    ))
    .await;
    latencies.sort_by(|a, b| a.total_cmp(b));
    json!({"claims": latencies.len(), "p50_ms": round2(percentile(&latencies, 0.5)), "p99_ms": round2(percentile(&latencies, 0.99))})
}

/// `n` deliveries in flight at once to a receiver that holds each for 110 s, from one worker
/// process with `n` slots: its resident memory once every one of them is waiting.
///
/// The hold outlasts the wait for all `n` below: the receiver's listen backlog is 1,024, so
/// of 10,000 connects at once some are dropped and retried by the kernel after 1, 3, 7, 15,
/// 31 and 63 s; with a 30 s hold the first deliveries could end before the last connected.
async fn rss_in_flight(n: usize) -> Value {
    let db = TestDb::new(Backend::Postgres).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    // Two endpoints: one endpoint may hold at most nine tenths of a worker's slots.
    for name in ["slow-a", "slow-b"] {
        post(&api, "/endpoints", &json!({"name": name, "type": "HTTP", "timeout_ms": 120_000,
            "spec": {"url": format!("{}/slow/110000", receiver.base_url), "method": "POST", "body_template": {"n": "{{input.n}}"}}
        }))
        .await;
    }
    let now = "'2026-01-01T00:00:00.000000Z'";
    let generator =
        format!("SELECT g, CASE WHEN g % 2 = 0 THEN 'slow-a' ELSE 'slow-b' END AS e FROM generate_series(1, {n}) AS g");
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_version, endpoint_type, trigger_type, idempotency_key, input, created_at)
         SELECT 'job_rss_' || g, e, 1, 'HTTP', 'IMMEDIATE', 'k' || g, '{{\"n\": 1}}', {now} FROM ({generator}) AS t;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_version, endpoint_type, idempotency_key, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_rss_' || g, 'job_rss_' || g, e, 1, 'HTTP', 'k' || g, 'QUEUED', '{{\"n\": 1}}', 1, {now}, {now} FROM ({generator}) AS t;"
    ))
    .await;
    let slots = n.to_string();
    let worker = start_server(&db, "worker", &[("TE_WORKER_MAX_CONCURRENT", &slots)]).await;
    let idle_kib = memory_kib(worker.pid(), "VmRSS");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while receiver.most_slow_at_once() < n {
        if std::time::Instant::now() > deadline {
            keep_log(&worker, "rss");
            // How the executions that are no longer in flight ended says why.
            let ended = "SELECT status || ' ' || COALESCE(CAST(output AS TEXT), '') FROM executions WHERE status <> 'RUNNING' LIMIT 5";
            let ended = db.texts(ended).await;
            panic!("only {} of {n} deliveries were in flight at once; ended: {ended:?}", receiver.most_slow_at_once());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (rss, peak) = (memory_kib(worker.pid(), "VmRSS"), memory_kib(worker.pid(), "VmHWM"));
    keep_log(&worker, "rss");
    let mib = |kib: u64| (kib as f64 / 1024.0 * 10.0).round() / 10.0;
    json!({"in_flight": n, "rss_mib": mib(rss), "peak_rss_mib": mib(peak), "rss_before_claims_mib": mib(idle_kib)})
}

/// A memory figure of process `pid` from /proc (`VmRSS`, `VmHWM`), in KiB.
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status is readable");
    status
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)?.trim_start_matches(':').trim().strip_suffix("kB")?.trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// The worker's TE_WORKER_MAX_CONCURRENT in the throughput scenarios (drain, cron load).
fn worker_slots() -> String {
    std::env::var("BENCH_WORKER_SLOTS").unwrap_or_else(|_| "400".into())
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[tokio::main]
async fn main() {
    let backends: Vec<Backend> = std::env::var("BENCH_BACKENDS")
        .unwrap_or_else(|_| "postgres,sqlite".into())
        .split(',')
        .map(|b| if b.trim() == "sqlite" { Backend::Sqlite } else { Backend::Postgres })
        .collect();
    let scenarios: std::collections::HashSet<String> = std::env::var("BENCH_SCENARIOS")
        .unwrap_or_else(|_| "drain,create,batch,latency,cron".into())
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    let mut report: HashMap<String, Value> = HashMap::new();
    for backend in backends {
        let name = format!("{backend:?}").to_lowercase();
        let mut results = serde_json::Map::new();
        if scenarios.contains("drain") {
            let r = drain(backend, env_usize("BENCH_DRAIN", 50_000)).await;
            println!("{name:<9} drain       {r}");
            results.insert("drain".into(), r);
        }
        if scenarios.contains("create") {
            let r = create(backend, env_usize("BENCH_CREATE", 10_000)).await;
            println!("{name:<9} create      {r}");
            results.insert("create".into(), r);
        }
        if scenarios.contains("batch") {
            let r = create_batched(backend, env_usize("BENCH_CREATE", 10_000)).await;
            println!("{name:<9} batch       {r}");
            results.insert("batch_create".into(), r);
        }
        if scenarios.contains("purge") && backend == Backend::Postgres {
            for purging in [false, true] {
                let r = drain_beside_purge(
                    env_usize("BENCH_PURGE_ROWS", 1_000_000),
                    env_usize("BENCH_PURGE_DRAIN", 20_000),
                    purging,
                )
                .await;
                println!("{name:<9} purge       {r}");
                results.insert(format!("drain_beside_purge_{}", if purging { "on" } else { "off" }), r);
            }
        }
        if scenarios.contains("soak") && backend == Backend::Postgres {
            let r = soak::soak(env_usize("BENCH_SOAK", 10_000_000), env_usize("BENCH_SOAK_WINDOW", 250_000)).await;
            println!("{name:<9} soak        {r}");
            results.insert("soak".into(), r);
        }
        if scenarios.contains("history") && backend == Backend::Postgres {
            let r = history::history(env_usize("BENCH_HISTORY", 10_000_000)).await;
            println!("{name:<9} history     {r}");
            results.insert("history".into(), r);
        }
        if scenarios.contains("scaling") && backend == Backend::Postgres {
            let r = scaling::scaling(env_usize("BENCH_SCALING", 100_000)).await;
            println!("{name:<9} scaling     {r}");
            results.insert("scaling".into(), r);
        }
        if scenarios.contains("convert") && backend == Backend::Postgres {
            let r = history::convert(env_usize("BENCH_CONVERT", 1_000_000)).await;
            println!("{name:<9} convert     {r}");
            results.insert("convert".into(), r);
        }
        if scenarios.contains("side-by-side") && backend == Backend::Postgres {
            let r = side_by_side(env_usize("BENCH_SIDE_BY_SIDE", 20_000)).await;
            println!("{name:<9} side-by-side {r}");
            results.insert("side_by_side".into(), r);
        }
        if scenarios.contains("keys") && backend == Backend::Postgres {
            let r = keys::keys(env_usize("BENCH_KEYS", 10_000), env_usize("BENCH_KEYS_EACH", 10)).await;
            println!("{name:<9} keys        {r}");
            results.insert("keys".into(), r);
        }
        if scenarios.contains("claim") {
            let r = claim_latency(backend, env_usize("BENCH_CLAIM_ROWS", 1_000_000)).await;
            println!("{name:<9} claim       {r}");
            results.insert("claim_latency".into(), r);
        }
        if scenarios.contains("rss") && backend == Backend::Postgres {
            let r = rss_in_flight(env_usize("BENCH_RSS_IN_FLIGHT", 10_000)).await;
            println!("{name:<9} rss         {r}");
            results.insert("rss_in_flight".into(), r);
        }
        if scenarios.contains("latency") {
            let r = fire_latency(backend, env_usize("BENCH_DELAYED", 1_000)).await;
            println!("{name:<9} latency     {r}");
            results.insert("fire_latency".into(), r);
        }
        if scenarios.contains("cron") {
            let r = cron_load(backend, env_usize("BENCH_CRON", 10_000)).await;
            println!("{name:<9} cron        {r}");
            results.insert("cron_load".into(), r);
        }
        if scenarios.contains("cron-mixed") {
            let r = cron_mixed(backend, env_usize("BENCH_CRON_MIXED", 100_000)).await;
            println!("{name:<9} cron-mixed  {r}");
            results.insert("cron_mixed".into(), r);
        }
        report.insert(name, Value::Object(results));
    }
    let path = std::env::var("BENCH_JSON").unwrap_or_else(|_| "bench-results/engine.json".into());
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("wrote {path}");
}
