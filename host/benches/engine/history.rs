//! History at scale (PostgreSQL, only when named): BENCH_HISTORY (10,000,000) finished
//! executions, with their attempts and log lines, made in SQL behind the queue as months of use
//! leave them, then what a user meets on top of them:
//!
//! - the claim, as a worker makes it (the `claim` scenario's rounds: 5,000 queued executions
//!   of two endpoints claimed 50 at a time), on the empty database and again on the full one;
//! - through one `api` process, one request after another (BENCH_HISTORY_REQUESTS, 200, of
//!   each): `GET /executions` filtered by status, endpoint and a day of `created_*`, the
//!   dead-letter view, a second page by cursor, `GET /jobs/{id}/executions` of a cron job with
//!   5,000 executions (oldest and newest first) and of a one-shot job, and the dashboard's
//!   overview. Their p50 and p99.
//!
//! The history: half the executions are ticks of 1,000 cron jobs, half one-shot jobs of their
//! own, over 20 endpoints and the 30 days before now (so the overview's last hour holds its
//! share); 8% FAILED after three attempts, 2% CANCELLED before any, the rest SUCCESS at the
//! first; one log line per attempt. Made in chunks of BENCH_HISTORY_CHUNK (500,000), then
//! `VACUUM ANALYZE`, as the scheduler's vacuumer leaves tables after a load.

use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{json, Value};

use super::{percentile, post, queued_claim_round, round2, start_server};
use crate::support::{Backend, Client, Receiver, TestDb};

/// Endpoints the history is spread over.
const ENDPOINTS: usize = 20;
/// Cron jobs that half the history belongs to.
const CRON_JOBS: usize = 1_000;
/// The span of the history, ending now.
const DAYS: i64 = 30;

pub async fn history(rows: usize) -> Value {
    let chunk = super::env_usize("BENCH_HISTORY_CHUNK", 500_000);
    let requests = super::env_usize("BENCH_HISTORY_REQUESTS", 200);
    let db = TestDb::new(Backend::Postgres).await;
    let receiver = Receiver::start().await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    for name in (0..ENDPOINTS).map(endpoint).chain(["bench".into(), "bench-b".into()]) {
        post(
            &api,
            "/endpoints",
            &json!({"name": name, "type": "HTTP",
            "spec": {"url": format!("{}/ok/{name}", receiver.base_url), "method": "POST"}}),
        )
        .await;
    }
    let store =
        taskexec::store::connect(&taskexec::store::DatabaseLocation::parse(Some(&db.url)).unwrap(), 4).await.unwrap();
    let empty = queued_claim_round(&db, &*store, Backend::Postgres, 0).await;

    let started = Instant::now();
    let now = Utc::now();
    let origin = now - chrono::Duration::days(DAYS);
    // Day partitions over the history, as a scheduler running all along would have made them
    // (store/partitions; the first day is the DEFAULT partition's).
    let day = Duration::from_secs(86_400);
    for d in 0..=DAYS {
        store.history_upkeep(origin + chrono::Duration::days(d), day, None, Duration::ZERO).await.unwrap();
    }
    make_history(&db, rows, chunk, origin, started).await;
    let load_seconds = started.elapsed().as_secs_f64();
    let database_mib = db.scalar("SELECT pg_database_size(current_database()) / 1048576").await;
    eprintln!("history: loaded in {load_seconds:.0} s, database {database_mib} MiB");

    let full = queued_claim_round(&db, &*store, Backend::Postgres, 1).await;
    let claim = json!({
        "empty": empty, "full": full,
        "p50_ratio_full_to_empty": round2(full["p50_ms"].as_f64().unwrap_or(f64::NAN) / empty["p50_ms"].as_f64().unwrap_or(f64::NAN)),
    });
    eprintln!("history: claim {claim}");

    let mut reads = serde_json::Map::new();
    let cookie = dashboard_session(&server.base_url).await;
    let http = reqwest::Client::new();
    for kind in ReadKind::ALL {
        let mut latencies = Vec::with_capacity(requests);
        for i in 0..requests {
            let path = kind.path(i, rows, now, &api).await;
            let started = Instant::now();
            let status = if kind == ReadKind::Overview {
                let r = http.get(format!("{}{path}", server.base_url)).header("cookie", &cookie).send().await.unwrap();
                let status = r.status();
                r.bytes().await.unwrap();
                status
            } else {
                api.get(&path).await.status
            };
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            assert!(status.is_success(), "GET {path}: {status}");
        }
        latencies.sort_by(f64::total_cmp);
        let r = json!({"p50_ms": round2(percentile(&latencies, 0.5)), "p99_ms": round2(percentile(&latencies, 0.99)),
                       "max_ms": round2(latencies[latencies.len() - 1])});
        eprintln!("history: {} {r}", kind.name());
        reads.insert(kind.name().into(), r);
    }
    let worst = reads.values().map(|r| r["p99_ms"].as_f64().unwrap_or(f64::INFINITY)).fold(0.0, f64::max);
    let ratio = claim["p50_ratio_full_to_empty"].as_f64().unwrap_or(f64::NAN);
    json!({
        "executions": rows, "load_seconds": load_seconds.round(), "database_mib": database_mib,
        "claim": claim, "reads": reads,
        "verdict": {
            "claim_within_10_percent": {"pass": ratio <= 1.10, "ratio": ratio},
            "reads_p99_within_50_ms": {"pass": worst <= 50.0, "worst_p99_ms": worst},
        },
    })
}

fn endpoint(i: usize) -> String {
    format!("hist-{i:02}")
}

/// `rows` finished executions, with their jobs, attempts and log lines, over the `DAYS` from
/// `origin`, made in chunks of `chunk`; then `VACUUM ANALYZE`, as the vacuumer leaves tables.
async fn make_history(db: &TestDb, rows: usize, chunk: usize, origin: chrono::DateTime<Utc>, started: Instant) {
    db.execute(&format!(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, cron_expression, cron_timezone, status, input, created_at)
         SELECT 'job_cron_' || c, 'hist-' || lpad((c % {ENDPOINTS})::text, 2, '0'), 'HTTP', 'CRON', '* * * * *', 'UTC',
                'RETIRED', '{{}}', '{origin}'
         FROM generate_series(0, {}) AS c",
        CRON_JOBS - 1
    ))
    .await;
    let mut made = 0;
    while made < rows {
        let to = (made + chunk).min(rows);
        db.execute(&history_chunk(made + 1, to, rows, origin)).await;
        made = to;
        eprintln!("history: {made} of {rows} executions made ({:.0} s)", started.elapsed().as_secs_f64());
    }
    for table in ["jobs", "executions", "attempts", "execution_logs"] {
        db.execute(&format!("VACUUM ANALYZE {table}")).await;
    }
}

/// The rows of the history's tables: executions, those waiting, attempts, log lines.
async fn row_counts(db: &TestDb) -> Vec<i64> {
    let mut counts = Vec::new();
    for sql in [
        "SELECT COUNT(*) FROM executions",
        "SELECT COUNT(*) FROM executions WHERE status = 'PENDING'",
        "SELECT COUNT(*) FROM attempts",
        "SELECT COUNT(*) FROM execution_logs",
    ] {
        counts.push(db.scalar(sql).await);
    }
    counts
}

/// A database written before history was partitioned (its migrations only, as versions before
/// bcbca1b left it) with BENCH_CONVERT (1,000,000) finished executions, their attempts and log
/// lines, and 10,000 waiting; then the store's migrate, which partitions it
/// (store/partitions.rs): how long that takes, and that every row is still there.
pub async fn convert(rows: usize) -> Value {
    let db = TestDb::new(Backend::Postgres).await;
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::migrate!("../migrations/postgres").run(&pool).await.unwrap();
    pool.close().await;
    let started = Instant::now();
    let origin = Utc::now() - chrono::Duration::days(DAYS);
    make_history(&db, rows, 500_000, origin, started).await;
    db.execute(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, input, created_at)
         SELECT 'job_wait_' || g, 'hist-00', 'HTTP', 'DELAYED', '{}', now() FROM generate_series(1, 10000) AS g;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, max_attempts, run_at, created_at)
         SELECT 'exec_wait_' || g, 'job_wait_' || g, 'hist-00', 'HTTP', 'PENDING', '{}', 3, now() + interval '1 day', now()
         FROM generate_series(1, 10000) AS g",
    )
    .await;
    let before = row_counts(&db).await;
    let database_mib = db.scalar("SELECT pg_database_size(current_database()) / 1048576").await;
    let store =
        taskexec::store::connect(&taskexec::store::DatabaseLocation::parse(Some(&db.url)).unwrap(), 4).await.unwrap();
    let converting = Instant::now();
    store.migrate().await.unwrap();
    let seconds = converting.elapsed().as_secs_f64();
    let after = row_counts(&db).await;
    assert_eq!(after, before, "every row is still there");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM executions_live").await, 10_000, "the queue is in its own partition");
    json!({"executions": rows, "database_mib": database_mib, "convert_seconds": round2(seconds), "rows": after})
}

/// Executions `from..=to` of `rows`, with their jobs (one-shot ones), attempts and log lines.
fn history_chunk(from: usize, to: usize, rows: usize, origin: chrono::DateTime<Utc>) -> String {
    let span_seconds = DAYS * 86_400;
    // One row per execution: which job, which endpoint (a cron job's, or for a one-shot job
    // one by turns), when, and how it ended (failures come in runs of 100 consecutive
    // executions, across every endpoint, as an outage makes them).
    let rows_sql = format!(
        "SELECT g,
                CASE WHEN g % 2 = 0 THEN 'job_cron_' || ((g / 2) % {CRON_JOBS}) ELSE 'job_once_' || g END AS job_id,
                'hist-' || lpad(((g / 2) % {CRON_JOBS} % {ENDPOINTS})::text, 2, '0') AS endpoint,
                TIMESTAMPTZ '{origin}' + make_interval(secs => g::double precision * {span_seconds} / {rows}) AS at,
                CASE WHEN g / 100 % 50 < 4 THEN 'FAILED' WHEN g / 100 % 50 = 4 THEN 'CANCELLED' ELSE 'SUCCESS' END AS status,
                CASE WHEN g / 100 % 50 < 4 THEN 3 WHEN g / 100 % 50 = 4 THEN 0 ELSE 1 END AS attempts
         FROM generate_series({from}, {to}) AS g"
    );
    format!(
        "CREATE TEMP TABLE h AS {rows_sql};
         INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, input, created_at)
         SELECT job_id, endpoint, 'HTTP', 'IMMEDIATE', '{{\"n\": 1}}', at FROM h WHERE g % 2 = 1;
         INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status, input, output, attempt_count,
                                 max_attempts, run_at, scheduled_at, claimed_at, started_at, completed_at, duration_ms,
                                 failure_handled_at, created_at)
         SELECT 'exec_h_' || g, job_id, endpoint, 'HTTP', status, '{{\"n\": 1}}',
                CASE status WHEN 'SUCCESS' THEN '{{\"status_code\": 200, \"body\": \"ok\"}}'::jsonb
                            WHEN 'FAILED' THEN '{{\"error\": {{\"type\": \"HTTP_ERROR\", \"status_code\": 503}}}}'::jsonb END,
                attempts, 3, at, at,
                CASE WHEN attempts > 0 THEN at + interval '4 ms' END,
                CASE WHEN attempts > 0 THEN at + interval '4 ms' END,
                at + interval '9 ms', CASE WHEN attempts > 0 THEN 5 END,
                CASE WHEN status = 'FAILED' THEN at + interval '1 s' END, at
         FROM h;
         INSERT INTO attempts (attempt_id, execution_id, attempt_number, status, started_at, completed_at, duration_ms, output, error, created_at)
         SELECT 'att_h_' || g || '_' || n, 'exec_h_' || g, n, CASE WHEN status = 'FAILED' THEN 'FAILED' ELSE 'SUCCESS' END,
                at + interval '4 ms', at + interval '9 ms', 5,
                CASE WHEN status = 'SUCCESS' THEN '{{\"status_code\": 200, \"body\": \"ok\"}}'::jsonb END,
                CASE WHEN status = 'FAILED' THEN '{{\"type\": \"HTTP_ERROR\", \"status_code\": 503, \"retryable\": true}}'::jsonb END,
                at
         FROM h, generate_series(1, h.attempts) AS n;
         INSERT INTO execution_logs (log_id, execution_id, attempt_number, level, message, logged_at)
         SELECT 'log_h_' || g || '_' || n, 'exec_h_' || g, n, CASE WHEN status = 'FAILED' THEN 'WARN' ELSE 'INFO' END,
                CASE WHEN status = 'FAILED' THEN 'POST answered 503 in 5 ms' ELSE 'POST answered 200 in 5 ms' END,
                at + interval '9 ms'
         FROM h, generate_series(1, h.attempts) AS n;
         DROP TABLE h"
    )
}

/// The reads measured.
#[derive(Clone, Copy, PartialEq)]
enum ReadKind {
    FailedOfEndpointInADay,
    SucceededOfEndpointInADay,
    EndpointInADayNewest,
    DeadLetters,
    SecondPage,
    CronJobOldest,
    CronJobNewest,
    OneShotJob,
    Overview,
}

impl ReadKind {
    const ALL: [Self; 9] = [
        Self::FailedOfEndpointInADay,
        Self::SucceededOfEndpointInADay,
        Self::EndpointInADayNewest,
        Self::DeadLetters,
        Self::SecondPage,
        Self::CronJobOldest,
        Self::CronJobNewest,
        Self::OneShotJob,
        Self::Overview,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::FailedOfEndpointInADay => "executions?status=FAILED&endpoint&a day",
            Self::SucceededOfEndpointInADay => "executions?status=SUCCESS&endpoint&a day",
            Self::EndpointInADayNewest => "executions?endpoint&a day&order=newest",
            Self::DeadLetters => "executions?status=FAILED",
            Self::SecondPage => "executions?status=FAILED&endpoint, second page",
            Self::CronJobOldest => "jobs/{cron}/executions",
            Self::CronJobNewest => "jobs/{cron}/executions?order=newest",
            Self::OneShotJob => "jobs/{one-shot}/executions",
            Self::Overview => "ui (overview)",
        }
    }

    /// The `i`th request's path (a different endpoint, day or job each time).
    async fn path(self, i: usize, rows: usize, now: chrono::DateTime<Utc>, api: &Client) -> String {
        let spread = i.wrapping_mul(7_919);
        let endpoint = endpoint(spread % ENDPOINTS);
        let day_start = now - chrono::Duration::days(1 + (spread % (DAYS as usize - 1)) as i64);
        let day = format!(
            "created_after={}&created_before={}",
            day_start.format("%Y-%m-%dT%H:%M:%SZ"),
            (day_start + chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M:%SZ")
        );
        match self {
            Self::FailedOfEndpointInADay => format!("/executions?status=FAILED&endpoint={endpoint}&{day}"),
            Self::SucceededOfEndpointInADay => format!("/executions?status=SUCCESS&endpoint={endpoint}&{day}"),
            Self::EndpointInADayNewest => format!("/executions?endpoint={endpoint}&{day}&order=newest"),
            Self::DeadLetters => "/executions?status=FAILED".into(),
            Self::SecondPage => {
                let first = format!("/executions?status=FAILED&endpoint={endpoint}&{day}");
                let page = api.get(&first).await;
                let cursor = page.body["cursor"].as_str().expect("a first page of 50 has a next cursor");
                format!("{first}&cursor={cursor}")
            }
            Self::CronJobOldest => format!("/jobs/job_cron_{}/executions", spread % CRON_JOBS),
            Self::CronJobNewest => format!("/jobs/job_cron_{}/executions?order=newest", spread % CRON_JOBS),
            Self::OneShotJob => format!("/jobs/job_once_{}/executions", 1 + 2 * (spread % (rows / 2))),
            Self::Overview => "/ui".into(),
        }
    }
}

/// A dashboard session's cookie, signed in with the test key.
async fn dashboard_session(base_url: &str) -> String {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let r = http
        .post(format!("{base_url}/ui/login"))
        .header("origin", base_url)
        .form(&[("key", crate::support::server::API_KEY), ("next", "/ui")])
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap();
    let cookie = r.headers().get("set-cookie").unwrap_or_else(|| panic!("signing in answered {}", r.status()));
    cookie.to_str().unwrap().split(';').next().unwrap().to_owned()
}
