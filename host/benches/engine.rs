//! The engine benchmark: the real `taskexec` binary (release build) on PostgreSQL and on
//! SQLite, delivering to an in-process HTTP receiver that answers 200 at once.
//!
//!     cargo bench -p taskexec --bench engine
//!
//! Scenarios (sizes can be lowered with the environment for a quick run):
//! - drain: BENCH_DRAIN (50,000) queued executions, one worker process: executions/second;
//! - create: BENCH_CREATE (10,000) `POST /jobs` IMMEDIATE from 32 keep-alive clients: jobs/second;
//! - fire latency: BENCH_DELAYED (1,000) DELAYED jobs with run_at spread over 30 s: delay from
//!   run_at to the receiver seeing the request, p50/p99/max;
//! - cron load: BENCH_CRON (10,000) per-minute cron jobs: after each minute boundary, how long
//!   until the last tick is delivered (two minutes observed).
//!
//! BENCH_BACKENDS (postgres,sqlite), BENCH_SCENARIOS (drain,create,latency,cron), BENCH_WORKER_SLOTS
//! (the worker's TE_WORKER_MAX_CONCURRENT in drain and cron load, 400), BENCH_TE_LOG and
//! BENCH_SERVER_LOG (the server's log level, and a file to keep its log in),
//! TE_TEST_POSTGRES_URL (postgres://postgres@127.0.0.1:5432/postgres), and BENCH_JSON
//! (bench-results/engine.json) adjust a run. Figures go to docs/benchmarks.md by hand.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::Connection;

const API_KEY: &str = "bench-api-key-0123456789";
const SECRET_KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// ---------- the receiver ----------

#[derive(Default)]
struct Seen {
    /// (arrival, request body) of every request.
    requests: Mutex<Vec<(DateTime<Utc>, Bytes)>>,
}

async fn receive(State(seen): State<Arc<Seen>>, body: Bytes) -> &'static str {
    seen.requests.lock().unwrap().push((Utc::now(), body));
    "OK"
}

async fn start_receiver() -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new().route("/hook", post(receive)).with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook"), seen)
}

// ---------- databases and servers ----------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Backend {
    Postgres,
    Sqlite,
}

struct Db {
    backend: Backend,
    url: String,
    _dir: tempfile::TempDir,
}

async fn fresh_db(backend: Backend) -> Db {
    let dir = tempfile::tempdir().unwrap();
    match backend {
        Backend::Sqlite => Db { backend, url: format!("sqlite:{}", dir.path().join("bench.db").display()), _dir: dir },
        Backend::Postgres => {
            let admin = std::env::var("TE_TEST_POSTGRES_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
            let name = format!("te_bench_{}", uuid::Uuid::new_v4().simple());
            let mut conn = sqlx::PgConnection::connect(&admin).await.expect("PostgreSQL is reachable");
            // Databases of earlier scenarios and runs (their servers are gone by now): left in
            // place, autovacuum works through them in the background of the next measurement.
            let leftovers: Vec<String> =
                sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'te\\_bench\\_%'")
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
            for old in leftovers {
                sqlx::query(&format!("DROP DATABASE IF EXISTS {old} WITH (FORCE)")).execute(&mut conn).await.unwrap();
            }
            sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.unwrap();
            let base = admin.rsplit_once('/').unwrap().0;
            Db { backend, url: format!("{base}/{name}"), _dir: dir }
        }
    }
}

impl Db {
    async fn scalar(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut c).await.unwrap()
            }
        }
    }

    async fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Postgres => {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
            Backend::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
            }
        }
    }
}

struct Server {
    child: Child,
    base_url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(db: &Db, roles: &str, extra: &[(&str, &str)]) -> Server {
    // A process with the API is ready when it listens; one without, when its role runs.
    let ready = if roles.contains("api") {
        "Listening."
    } else if roles.contains("worker") {
        "Worker running."
    } else {
        "Scheduler running."
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_taskexec"));
    command
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TE_DATABASE_URL", &db.url)
        .env("TE_LISTEN_ADDR", "127.0.0.1:0")
        .env("TE_API_KEYS", API_KEY)
        .env("TE_SECRET_ENCRYPTION_KEY", SECRET_KEY)
        .env("TE_ROLES", roles)
        // BENCH_TE_LOG raises the server's log level; BENCH_SERVER_LOG keeps its log in a file.
        .env("TE_LOG", std::env::var("BENCH_TE_LOG").unwrap_or_else(|_| "warn,taskexec::cli=info".into()))
        .env("TE_LOG_FORMAT", "json")
        .envs(extra.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("taskexec starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut keep = std::env::var("BENCH_SERVER_LOG").ok().map(|path| std::fs::File::create(path).unwrap());
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(file) = keep.as_mut() {
                use std::io::Write;
                let _ = writeln!(file, "{line}");
            }
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let message = v["message"].as_str().unwrap_or_default();
                if message == ready {
                    let _ = tx.send(v["addr"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("taskexec became ready");
    Server { child, base_url: format!("http://{addr}") }
}

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn post(&self, path: &str, body: &Value) -> reqwest::StatusCode {
        let r = self.http.post(format!("{}{path}", self.base)).bearer_auth(API_KEY).json(body).send().await.unwrap();
        let status = r.status();
        assert!(status.is_success(), "POST {path}: {status} {}", r.text().await.unwrap_or_default());
        status
    }
}

async fn register(api: &Api, receiver_url: &str) {
    api.post("/configs", &json!({"name": "bench", "values": {"url": receiver_url}})).await;
    api.post("/endpoints", &json!({"name": "bench", "type": "HTTP", "config": "bench", "spec": {
        "url": "{{config.url}}", "method": "POST", "body_template": {"n": "{{input.n}}", "run_at": "{{input.run_at}}"}
    }})).await;
}

async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> F,
) {
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let db = fresh_db(backend).await;
    let (receiver_url, seen) = start_receiver().await;
    let server = start_server(&db, "api", &[]);
    let api = Api { http: reqwest::Client::new(), base: server.base_url.clone() };
    register(&api, &receiver_url).await;
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
    let started = Instant::now();
    let _worker = start_server(&db, "worker", &[("TE_WORKER_MAX_CONCURRENT", &worker_slots())]);
    wait_until("the drain", Duration::from_secs(900), || async { seen.requests.lock().unwrap().len() >= n }).await;
    wait_until("every execution recorded", Duration::from_secs(300), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == n as i64
    })
    .await;
    let seconds = started.elapsed().as_secs_f64();
    json!({"executions": n, "seconds": round2(seconds), "executions_per_second": (n as f64 / seconds).round()})
}

/// `n` creates from 32 concurrent keep-alive clients against a server with every role.
async fn create(backend: Backend, n: usize) -> Value {
    let db = fresh_db(backend).await;
    let (receiver_url, _seen) = start_receiver().await;
    let server = start_server(&db, "api,scheduler,worker", &[]);
    let api = Arc::new(Api { http: reqwest::Client::new(), base: server.base_url.clone() });
    register(&api, &receiver_url).await;
    let clients = 32;
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                for i in (c..n).step_by(clients) {
                    let t = Instant::now();
                    api.post("/jobs", &json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("c{i}"), "input": {"n": i, "run_at": "-"}})).await;
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
    latencies.sort_by(f64::total_cmp);
    json!({"jobs": n, "clients": clients, "jobs_per_second": (n as f64 / seconds).round(),
           "p50_ms": round2(percentile(&latencies, 0.5)), "p99_ms": round2(percentile(&latencies, 0.99))})
}

/// `n` DELAYED jobs with run_at spread over 30 s; the delay from run_at to arrival.
async fn fire_latency(backend: Backend, n: usize) -> Value {
    let db = fresh_db(backend).await;
    let (receiver_url, seen) = start_receiver().await;
    let server = start_server(&db, "api,scheduler,worker", &[]);
    let api = Api { http: reqwest::Client::new(), base: server.base_url.clone() };
    register(&api, &receiver_url).await;
    let base = Utc::now() + chrono::Duration::seconds(5);
    for i in 0..n {
        let run_at = base + chrono::Duration::microseconds((30_000_000 * i / n) as i64);
        api.post(
            "/jobs",
            &json!({"endpoint": "bench", "trigger": "DELAYED", "idempotency_key": format!("d{i}"), "run_at": run_at,
            "input": {"n": i, "run_at": run_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)}}),
        )
        .await;
    }
    wait_until("every delayed job", Duration::from_secs(120), || async { seen.requests.lock().unwrap().len() >= n })
        .await;
    let mut delays: Vec<f64> = seen
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(at, body)| {
            let body: Value = serde_json::from_slice(body).unwrap();
            let run_at: DateTime<Utc> = body["run_at"].as_str().unwrap().parse().unwrap();
            (*at - run_at).num_microseconds().unwrap() as f64 / 1000.0
        })
        .collect();
    delays.sort_by(f64::total_cmp);
    json!({"jobs": n, "p50_ms": round2(percentile(&delays, 0.5)), "p99_ms": round2(percentile(&delays, 0.99)),
           "max_ms": round2(*delays.last().unwrap()), "min_ms": round2(delays[0])})
}

/// `n` per-minute cron jobs; for two minute boundaries, the time from the boundary until the
/// last of that minute's ticks reached the receiver.
async fn cron_load(backend: Backend, n: usize) -> Value {
    let db = fresh_db(backend).await;
    let (receiver_url, seen) = start_receiver().await;
    let server = start_server(&db, "api,scheduler,worker", &[("TE_WORKER_MAX_CONCURRENT", &worker_slots())]);
    let api = Arc::new(Api { http: reqwest::Client::new(), base: server.base_url.clone() });
    register(&api, &receiver_url).await;
    let tasks: Vec<_> = (0..16)
        .map(|c| {
            let api = api.clone();
            tokio::spawn(async move {
                for i in (c..n).step_by(16) {
                    api.post(
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
        let until = boundary + chrono::Duration::seconds(55);
        wait_until("the minute's ticks", Duration::from_secs(180), || async {
            let in_minute =
                seen.requests.lock().unwrap().iter().filter(|(at, _)| *at >= boundary && *at < until).count();
            in_minute >= n || Utc::now() > until
        })
        .await;
        let arrivals: Vec<DateTime<Utc>> = seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at >= boundary && *at < until)
            .map(|(at, _)| *at)
            .collect();
        let mut after: Vec<f64> = arrivals.iter().map(|t| (*t - boundary).num_milliseconds() as f64 / 1000.0).collect();
        after.sort_by(f64::total_cmp);
        let last = after.last().copied();
        let first = after.first().copied();
        let median = after.get(after.len() / 2).copied();
        // Ticks are made ahead of their minute: none may reach the receiver before it.
        let early = seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _)| *at < boundary && *at >= boundary - chrono::Duration::seconds(5))
            .count();
        results.push(json!({"minute": boundary.to_rfc3339(), "delivered": arrivals.len(), "last_tick_after_s": last,
            "first_tick_after_s": first, "median_tick_after_s": median, "delivered_early": early}));
    }
    json!({"cron_jobs": n, "minutes": results})
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
    let scenarios = std::env::var("BENCH_SCENARIOS").unwrap_or_else(|_| "drain,create,latency,cron".into());
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
        report.insert(name, Value::Object(results));
    }
    let path = std::env::var("BENCH_JSON").unwrap_or_else(|_| "bench-results/engine.json".into());
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("wrote {path}");
}
