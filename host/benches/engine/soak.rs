//! The soak (PostgreSQL, only when named; `scripts/bench soak`): BENCH_SOAK (10,000,000)
//! executions created through the API and delivered, in windows of BENCH_SOAK_WINDOW (250,000),
//! one after another, as a user's history piles up: each window's jobs are created by
//! `POST /jobs/batch` (1,000 a request, four clients) and, a fiftieth of them, by single
//! `POST /jobs` (eight clients), each an HTTP POST to nginx in its own process, while
//! BENCH_SOAK_CRON (20) per-second cron jobs fire throughout. One `api` process and one
//! `worker,scheduler` process, with the service's defaults but `TE_RETENTION`
//! (BENCH_SOAK_RETENTION, 5m), so the purge deletes history during the run; PostgreSQL at its
//! own defaults (autovacuum as the migrations set it per table; BENCH_SOAK_VACUUM sets the
//! scheduler's TE_VACUUM; BENCH_SOAK_AUTOVACUUM=server
//! resets the tables to the server's settings, to compare).
//!
//! After each window: its rate (the window's executions over the time from its first create
//! to its last delivery), the cron jobs' fire lateness p99 in the window (their first
//! attempt's start, as the worker recorded it, − the tick's time), the worker's RSS, the
//! database's size, and the dead and live tuples of the busiest tables. The run passes when every window's rate is within 15% of the first full window's,
//! lateness p99 stays ≤ 20 ms, the worker's RSS grows < 10% after the first two windows, and
//! the database's size stays within 2× its size when the first purge ran. BENCH_SOAK_SVG names
//! a file to draw the windows in. Each window also reports the WAL written and the CPU time
//! of the worker, the API and PostgreSQL per execution: the measured costs docs/scaling.md
//! is to be built from.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{memory_kib, post, side_by_side_server_url, start_server, Nginx};
use crate::support::TestDb;

/// The busiest tables, whose dead tuples the report follows: each summed over its partitions
/// where it has them (store/partitions.rs), and the queue's own partition apart.
const TABLES: [&str; 5] = ["executions", "jobs", "attempts", "execution_logs", "executions_live"];

/// What one window measured.
#[derive(Debug, Clone, serde::Serialize)]
struct Window {
    /// Executions of the windows delivered so far, this one included.
    delivered: usize,
    per_second: f64,
    cron_lateness_p99_ms: f64,
    /// Of that lateness, the part before the tick existed: p99 of how long after its time a
    /// cron tick was materialized (0 when made ahead, as it should be).
    cron_made_late_p99_ms: f64,
    worker_rss_mib: f64,
    database_mib: f64,
    /// `(table, dead, live)`.
    tuples: Vec<(String, i64, i64)>,
    purged_yet: bool,
    /// WAL written during the window, per execution of it (bytes).
    wal_bytes_per_execution: f64,
    /// CPU time per execution of the window (user + system, ms): the worker process, the API
    /// process, and every PostgreSQL process together (the machine's whole server).
    cpu_ms_per_execution: CpuPerExecution,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
struct CpuPerExecution {
    worker: f64,
    api: f64,
    postgres: f64,
}

/// A process's CPU time so far (user + system), in clock ticks (`/proc/PID/stat`).
pub(super) fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    // The command name may hold spaces; the fields after it are space-separated.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    field(11) + field(12)
}

/// The CPU time of every process named `postgres` (the server and its backends), in ticks.
/// Backends that ended during the window take theirs with them: the figure is a floor.
pub(super) fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres"))
        .map(cpu_ticks)
        .sum()
}

/// Milliseconds per clock tick (`getconf CLK_TCK`, 100 on Linux).
pub(super) const MS_PER_TICK: f64 = 10.0;

pub async fn soak(total: usize, window: usize) -> Value {
    let cron_jobs = super::env_usize("BENCH_SOAK_CRON", 20);
    let retention = std::env::var("BENCH_SOAK_RETENTION").unwrap_or_else(|_| "5m".into());
    let nginx = Nginx::start();
    let db = TestDb::postgres_on(&side_by_side_server_url()).await;
    let api_server = start_server(&db, "api", &[]).await;
    let api = api_server.client();
    for name in ["bench", "cron"] {
        post(
            &api,
            "/endpoints",
            &json!({"name": name, "type": "HTTP", "spec": {
                "url": nginx.url, "method": "POST", "body_template": {"n": "{{input.n}}"}
            }}),
        )
        .await;
    }
    // BENCH_SOAK_VACUUM sets the worker's TE_VACUUM (`off`: nothing but the server's autovacuum).
    let vacuum = std::env::var("BENCH_SOAK_VACUUM").unwrap_or_else(|_| "auto".into());
    let worker = start_server(
        &db,
        "worker,scheduler",
        &[("TE_RETENTION", &retention), ("TE_PURGE_INTERVAL_SEC", "30"), ("TE_VACUUM", &vacuum)],
    )
    .await;
    // BENCH_SOAK_AUTOVACUUM=server: the tables at the server's autovacuum settings rather than
    // the migrations' (store/postgres_autovacuum.sql), to measure what those settings do.
    if std::env::var("BENCH_SOAK_AUTOVACUUM").is_ok_and(|v| v == "server") {
        for table in ["executions_live", "jobs"] {
            db.execute(&format!(
                "ALTER TABLE {table} RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
                   autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold,
                   autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay)"
            ))
            .await;
        }
    }
    // The scheduler makes history partitions from its first round on, the first starting
    // 10 s to a span ahead (store/partitions.rs); until then finished executions go to the
    // DEFAULT partition, which the purge empties row by row. The windows begin once a
    // partition covers now, as in a service that has been running.
    let deadline = Instant::now() + Duration::from_secs(120);
    while db.scalar(PARTITION_OVER_NOW).await == 0 {
        assert!(Instant::now() < deadline, "no history partition covers now after two minutes");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for i in 0..cron_jobs {
        post(&api, "/jobs", &json!({"endpoint": "cron", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"n": i}}))
            .await;
    }

    let http = reqwest::Client::builder().pool_max_idle_per_host(16).build().unwrap();
    let base = api_server.base_url.clone();
    let key = crate::support::server::API_KEY;
    let mut windows: Vec<Window> = Vec::new();
    let mut first_purge_size: Option<f64> = None;
    let mut delivered = 0usize;
    let mut next_key = 0usize;
    while delivered < total {
        let size = window.min(total - delivered);
        let started = Instant::now();
        let window_start = chrono::Utc::now();
        let wal_start = db.scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").await;
        let cpu_start = (cpu_ticks(worker.pid()), cpu_ticks(api_server.pid()), postgres_ticks());
        create_window(&http, &base, key, next_key, size).await;
        next_key += size;
        let deadline = Instant::now() + Duration::from_secs(3600);
        while db.scalar(UNFINISHED_BENCH).await != 0 {
            assert!(Instant::now() < deadline, "a window did not drain in an hour");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let wal = db.scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").await - wal_start;
        let per = |ticks: u64, from: u64| {
            ((ticks.saturating_sub(from) as f64 * MS_PER_TICK / size as f64) * 1000.0).round() / 1000.0
        };
        let cpu = CpuPerExecution {
            worker: per(cpu_ticks(worker.pid()), cpu_start.0),
            api: per(cpu_ticks(api_server.pid()), cpu_start.1),
            postgres: per(postgres_ticks(), cpu_start.2),
        };
        delivered += size;
        // The run's first job gone: the purge has begun on the windows' history. (A count of
        // the windows' finished executions said the same by reading all of them, seconds of
        // a core between windows.)
        let purged = db.scalar(FIRST_JOB_LEFT).await == 0;
        let database_mib = db.scalar("SELECT pg_database_size(current_database())").await as f64 / 1048576.0;
        if purged && first_purge_size.is_none() {
            first_purge_size = Some(database_mib);
        }
        let mut tuples = Vec::new();
        for table in TABLES {
            // Its partitions where it has them; pg_partition_tree lists nothing for a plain table.
            let leaves = format!(
                "FROM pg_stat_user_tables s
                 WHERE s.relid IN (SELECT relid FROM pg_partition_tree(to_regclass('{table}')) WHERE isleaf)
                    OR s.relid = to_regclass('{table}')"
            );
            let dead = db.scalar(&format!("SELECT COALESCE(SUM(s.n_dead_tup), 0)::bigint {leaves}")).await;
            let live = db.scalar(&format!("SELECT COALESCE(SUM(s.n_live_tup), 0)::bigint {leaves}")).await;
            tuples.push((table.to_owned(), dead, live));
        }
        // Both reads confined to the newest history partitions by literal bounds on
        // created_at, which the planner prunes by (a bound computed in SQL, `now() - …`, is
        // pruned only at execution, after every partition was planned and locked): ticks are
        // made at most TE_CRON_LOOKAHEAD_SEC (10 s) ahead of their time, so a minute before
        // the window began holds them all. Reading the whole history instead took 4–10 s a
        // window and held its partitions, whose TRUNCATE then waited and gave up.
        let since = (window_start - chrono::Duration::minutes(1)).to_rfc3339();
        let lateness = db
            .scalar(&format!(
                "SELECT COALESCE((1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY EXTRACT(EPOCH FROM a.started_at - e.scheduled_at)))::bigint, -1)
                 FROM executions e JOIN attempts a ON a.execution_id = e.execution_id AND a.attempt_number = 1
                 WHERE e.endpoint = 'cron' AND e.claimed_at >= '{start}'
                   AND e.created_at >= '{since}'::timestamptz AND a.created_at >= '{since}'::timestamptz",
                start = window_start.to_rfc3339()
            ))
            .await;
        let made_late = db
            .scalar(&format!(
                "SELECT COALESCE((1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY GREATEST(0, EXTRACT(EPOCH FROM created_at - scheduled_at))))::bigint, -1)
                 FROM executions WHERE endpoint = 'cron' AND claimed_at >= '{start}' AND created_at >= '{since}'::timestamptz",
                start = window_start.to_rfc3339()
            ))
            .await;
        let w = Window {
            delivered,
            per_second: (size as f64 / seconds).round(),
            cron_lateness_p99_ms: lateness as f64,
            cron_made_late_p99_ms: made_late as f64,
            worker_rss_mib: (memory_kib(worker.pid(), "VmRSS") as f64 / 1024.0 * 10.0).round() / 10.0,
            database_mib: database_mib.round(),
            tuples,
            purged_yet: purged,
            wal_bytes_per_execution: (wal as f64 / size as f64).round(),
            cpu_ms_per_execution: cpu,
        };
        eprintln!("soak: {}", serde_json::to_string(&w).unwrap());
        windows.push(w);
    }
    super::keep_log(&worker, "soak-worker");
    drop(worker);

    let verdict = judge(&windows, first_purge_size);
    if let Ok(path) = std::env::var("BENCH_SOAK_SVG") {
        std::fs::write(&path, svg(&windows)).unwrap_or_else(|e| panic!("writing {path}: {e}"));
    }
    json!({"executions": total, "window": window, "cron_jobs_per_second": cron_jobs, "retention": retention, "te_vacuum": vacuum,
           "windows": windows, "verdict": verdict})
}

/// Whether a partition of `executions_done` (not the DEFAULT one) covers now.
const PARTITION_OVER_NOW: &str = "SELECT COUNT(*) FROM (
     SELECT pg_get_expr(c.relpartbound, c.oid) AS bound
     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = to_regclass('executions_done')) AS p
 WHERE bound <> 'DEFAULT'
   AND (regexp_match(bound, 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz <= now()
   AND (regexp_match(bound, 'TO \\(''([^'']+)''\\)'))[1]::timestamptz > now()";

/// Whether the first window's first job is still there, by the idempotency key's index.
const FIRST_JOB_LEFT: &str = "SELECT COUNT(*) FROM jobs WHERE endpoint = 'bench' AND idempotency_key = 'k0'";

/// Whether an execution of the windows' endpoint still waits or runs: the partial indexes on
/// those statuses answer without reading finished rows.
const UNFINISHED_BENCH: &str = "SELECT CASE WHEN EXISTS (SELECT 1 FROM executions WHERE status IN ('QUEUED', 'RETRYING', 'RUNNING') AND endpoint = 'bench') THEN 1 ELSE 0 END::bigint";

/// Create one window's jobs: a fiftieth one at a time, the rest in batches.
async fn create_window(http: &reqwest::Client, base: &str, key: &str, first: usize, size: usize) {
    let singles = size / 50;
    let batched = size - singles;
    let job = |i: usize| json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("k{i}"), "input": {"n": i}});
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..4 {
        let (http, url, key) = (http.clone(), format!("{base}/jobs/batch"), key.to_owned());
        let jobs: Vec<usize> = (first..first + batched).filter(|i| (i / 1000) % 4 == client).collect();
        tasks.spawn(async move {
            for chunk in jobs.chunks(1000) {
                let body = json!({"jobs": chunk.iter().map(|&i| job(i)).collect::<Vec<_>>()});
                let r = http.post(&url).bearer_auth(&key).json(&body).send().await.unwrap();
                assert!(r.status().is_success(), "POST /jobs/batch: {}", r.status());
            }
        });
    }
    for client in 0..8 {
        let (http, url, key) = (http.clone(), format!("{base}/jobs"), key.to_owned());
        let jobs: Vec<usize> = (first + batched..first + size).filter(|i| i % 8 == client).collect();
        tasks.spawn(async move {
            for i in jobs {
                let r = http.post(&url).bearer_auth(&key).json(&job(i)).send().await.unwrap();
                assert!(r.status().is_success(), "POST /jobs: {}", r.status());
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// The pass conditions of the module's list, each with what was seen.
fn judge(windows: &[Window], first_purge_size: Option<f64>) -> Value {
    let Some(first) = windows.first() else { return json!({}) };
    let slowest = windows.iter().map(|w| w.per_second).fold(f64::INFINITY, f64::min);
    let worst_lateness = windows.iter().map(|w| w.cron_lateness_p99_ms).fold(0.0, f64::max);
    let warm_rss = windows.get(2).or(windows.last()).map_or(0.0, |w| w.worker_rss_mib);
    let top_rss = windows.iter().skip(2).map(|w| w.worker_rss_mib).fold(warm_rss, f64::max);
    let largest = windows.iter().map(|w| w.database_mib).fold(0.0, f64::max);
    json!({
        "rate_within_15_percent": json!({"pass": slowest >= 0.85 * first.per_second, "first": first.per_second, "slowest": slowest}),
        "cron_lateness_p99_within_20_ms": json!({"pass": worst_lateness <= 20.0, "worst_ms": worst_lateness}),
        "rss_growth_under_10_percent": json!({"pass": top_rss < 1.1 * warm_rss, "after_warm_up_mib": warm_rss, "largest_mib": top_rss}),
        "database_within_2x_of_first_purge": match first_purge_size {
            None => json!({"pass": Value::Null, "why": "no purge ran during the run"}),
            Some(size) => json!({"pass": largest <= 2.0 * size, "at_first_purge_mib": size.round(), "largest_mib": largest}),
        },
    })
}

/// The windows as five charts, one above the other, over executions delivered.
fn svg(windows: &[Window]) -> String {
    type Series = (&'static str, fn(&Window) -> f64);
    let series: [Series; 5] = [
        ("deliveries/s", |w| w.per_second),
        ("cron fire lateness p99 (ms)", |w| w.cron_lateness_p99_ms),
        ("worker RSS (MiB)", |w| w.worker_rss_mib),
        ("database size (MiB)", |w| w.database_mib),
        ("dead tuples, executions", |w| w.tuples.first().map_or(0.0, |t| t.1 as f64)),
    ];
    let (width, panel, left, top) = (720.0, 130.0, 70.0, 20.0);
    let max_x = windows.last().map_or(1.0, |w| w.delivered as f64);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{}" font-family="sans-serif" font-size="11">"#,
        top + panel * series.len() as f64 + 20.0
    );
    out.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, (label, value)) in series.iter().enumerate() {
        let y0 = top + panel * i as f64;
        let h = panel - 35.0;
        let max_y = windows.iter().map(value).fold(0.0, f64::max).max(1.0) * 1.1;
        let points: Vec<String> = windows
            .iter()
            .map(|w| {
                let x = left + (width - left - 20.0) * w.delivered as f64 / max_x;
                let y = y0 + 15.0 + h * (1.0 - value(w) / max_y);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        out.push_str(&format!(
            r##"<text x="{left}" y="{:.1}" font-weight="bold">{label}</text><line x1="{left}" y1="{:.1}" x2="{left}" y2="{:.1}" stroke="#888"/><line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888"/><text x="{:.1}" y="{:.1}" text-anchor="end">{:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end">0</text><polyline fill="none" stroke="#2060c0" stroke-width="1.5" points="{}"/>"##,
            y0 + 10.0,
            y0 + 15.0,
            y0 + 15.0 + h,
            y0 + 15.0 + h,
            width - 20.0,
            y0 + 15.0 + h,
            left - 4.0,
            y0 + 19.0,
            max_y,
            left - 4.0,
            y0 + 15.0 + h,
            points.join(" ")
        ));
    }
    out.push_str(&format!(
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">executions delivered (0 to {max_x:.0})</text></svg>"#,
        width / 2.0,
        top + panel * series.len() as f64 + 10.0
    ));
    out
}
