//! The scaling run (PostgreSQL, only when named; `scripts/bench scaling`): BENCH_SCALING
//! (100,000) IMMEDIATE jobs created through two `api` processes, then drained by 1, 2 and 4
//! `worker` processes beside 1, 2 and 3 `scheduler` processes, each configuration on a
//! database of its own, every process with the service's defaults, each job an HTTP POST to
//! nginx in its own process. A tenth of the jobs are for an endpoint with `max_concurrency`
//! (BENCH_SCALING_CAP, 20), which must hold across the processes.
//!
//! Per configuration: jobs created per second and the CPU time it took the APIs and
//! PostgreSQL; deliveries per second (from the first worker's start to the last
//! completion), that each execution was delivered once per attempt (every one SUCCESS at its
//! first attempt), the most executions of the capped endpoint seen running at once (polled
//! every 20 ms), the CPU time of each kind of process over the drain and the executions per
//! CPU-second of the whole machine, and PostgreSQL connections per process: the most in use
//! (`pg_stat_activity`, by the `application_name` each process gives itself) against the pool
//! it was configured with.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::soak::{cpu_ticks, postgres_ticks, MS_PER_TICK};
use super::{post, side_by_side_server_url, start_server, Nginx};
use crate::support::{Server, TestDb};

/// (workers, schedulers) of each configuration.
const CONFIGURATIONS: [(usize, usize); 3] = [(1, 1), (2, 2), (4, 3)];

pub async fn scaling(n: usize) -> Value {
    let cap = super::env_usize("BENCH_SCALING_CAP", 20);
    let nginx = Nginx::start();
    let mut runs = Vec::new();
    for (workers, schedulers) in CONFIGURATIONS {
        let run = configuration(n, cap, workers, schedulers, &nginx).await;
        eprintln!("scaling: {run}");
        runs.push(run);
    }
    json!({"jobs": n, "capped_endpoint_max_concurrency": cap, "runs": runs})
}

async fn configuration(n: usize, cap: usize, workers: usize, schedulers: usize, nginx: &Nginx) -> Value {
    let db = TestDb::postgres_on(&side_by_side_server_url()).await;
    let apis = [start_server(&db, "api", &[]).await, start_server(&db, "api", &[]).await];
    let api = apis[0].client();
    for (name, max_concurrency) in [("bench", None), ("capped", Some(cap))] {
        post(
            &api,
            "/endpoints",
            &json!({"name": name, "type": "HTTP", "max_concurrency": max_concurrency, "spec": {
                "url": nginx.url, "method": "POST", "body_template": {"n": "{{input.n}}"}
            }}),
        )
        .await;
    }
    // The jobs, a thousand a request, through both API processes in turn.
    let create_before = (apis.iter().map(|s| cpu_ticks(s.pid())).sum::<u64>(), postgres_ticks());
    let create_started = Instant::now();
    for (batch, from) in (0..n).step_by(1000).enumerate() {
        let jobs: Vec<Value> = (from..n.min(from + 1000))
            .map(|i| {
                let endpoint = if i % 10 == 0 { "capped" } else { "bench" };
                json!({"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": format!("k{i}"), "input": {"n": i}})
            })
            .collect();
        post(&apis[batch % 2].client(), "/jobs/batch", &json!({ "jobs": jobs })).await;
    }
    let create_seconds = create_started.elapsed().as_secs_f64();
    let create_cpu = (
        (apis.iter().map(|s| cpu_ticks(s.pid())).sum::<u64>() - create_before.0) as f64 * MS_PER_TICK / 1000.0,
        postgres_ticks().saturating_sub(create_before.1) as f64 * MS_PER_TICK / 1000.0,
    );
    let mut scheduler_processes = Vec::new();
    for _ in 0..schedulers {
        scheduler_processes.push(start_server(&db, "scheduler", &[]).await);
    }
    super::settle();
    let ticks = |servers: &[&Server]| servers.iter().map(|s| cpu_ticks(s.pid())).sum::<u64>();
    let api_refs: Vec<&Server> = apis.iter().collect();
    let scheduler_refs: Vec<&Server> = scheduler_processes.iter().collect();
    let before = (ticks(&api_refs), ticks(&scheduler_refs), postgres_ticks(), nginx_ticks(nginx));
    let started_ms = chrono::Utc::now().timestamp_millis();
    let mut worker_processes = Vec::new();
    for _ in 0..workers {
        worker_processes.push(start_server(&db, "worker", &[]).await);
    }
    let worker_refs: Vec<&Server> = worker_processes.iter().collect();

    // Until drained: the capped endpoint's RUNNING executions, and each process's connections.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut capped_running_max = 0;
    let mut connections_max: HashMap<String, i64> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(900);
    while db.scalar(UNFINISHED).await != 0 {
        assert!(Instant::now() < deadline, "the drain did not finish in 900 s");
        capped_running_max = capped_running_max
            .max(db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'RUNNING' AND endpoint = 'capped'").await);
        let counts: Vec<(String, i64)> = sqlx::query_as(CONNECTIONS).fetch_all(&pool).await.unwrap();
        for (name, count) in counts {
            let max = connections_max.entry(name).or_default();
            *max = (*max).max(count);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last_ms = db.scalar("SELECT (EXTRACT(EPOCH FROM MAX(completed_at)) * 1000)::bigint FROM executions").await;
    let seconds = (last_ms - started_ms) as f64 / 1000.0;
    let cpu = |after: u64, before: u64| after.saturating_sub(before) as f64 * MS_PER_TICK / 1000.0;
    let cpu_seconds = json!({
        "workers": cpu(ticks(&worker_refs), 0),
        "schedulers": cpu(ticks(&scheduler_refs), before.1),
        "apis": cpu(ticks(&api_refs), before.0),
        "postgres": cpu(postgres_ticks(), before.2),
        "nginx": cpu(nginx_ticks(nginx), before.3),
    });
    let total_cpu: f64 = cpu_seconds.as_object().unwrap().values().filter_map(Value::as_f64).sum();
    let succeeded = db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await;
    let attempts = db.scalar("SELECT COALESCE(SUM(attempt_count), 0)::bigint FROM executions").await;
    assert_eq!((succeeded, attempts), (n as i64, n as i64), "each execution delivered once, at its first attempt");
    assert!(
        capped_running_max <= cap as i64,
        "max_concurrency {cap} held across {workers} workers: {capped_running_max}"
    );
    // Connections per process, by kind, as each named itself (`taskexec/PID`).
    let kind_of: HashMap<String, &str> = [("api", &api_refs), ("scheduler", &scheduler_refs), ("worker", &worker_refs)]
        .into_iter()
        .flat_map(|(kind, servers)| servers.iter().map(move |s| (format!("taskexec/{}", s.pid()), kind)))
        .collect();
    let mut in_use: HashMap<&str, Vec<i64>> = HashMap::new();
    for (name, count) in &connections_max {
        if let Some(kind) = kind_of.get(name) {
            in_use.entry(kind).or_default().push(*count);
        }
    }
    json!({
        "workers": workers, "schedulers": schedulers, "apis": 2,
        "created_per_second": (n as f64 / create_seconds).round(),
        "create_cpu_seconds": {"apis": create_cpu.0, "postgres": create_cpu.1},
        "per_second": (n as f64 / seconds).round(),
        "seconds": (seconds * 100.0).round() / 100.0,
        "delivered_once_each": true,
        "capped_running_max": capped_running_max,
        "cpu_seconds": cpu_seconds,
        "executions_per_cpu_second": (n as f64 / total_cpu).round(),
        "connections_in_use_max": in_use,
        "connections_configured": {"api": 20, "scheduler": 8, "worker": 8},
    })
}

fn nginx_ticks(nginx: &Nginx) -> u64 {
    nginx.pids().into_iter().map(cpu_ticks).sum()
}

/// Whether an execution still waits or runs.
const UNFINISHED: &str = "SELECT CASE WHEN EXISTS (SELECT 1 FROM executions WHERE status IN ('QUEUED', 'RETRYING', 'RUNNING')) THEN 1 ELSE 0 END::bigint";

/// Connections to this database per `application_name`.
const CONNECTIONS: &str = "SELECT application_name, COUNT(*) FROM pg_stat_activity
     WHERE datname = current_database() AND application_name LIKE 'taskexec/%' GROUP BY 1";
