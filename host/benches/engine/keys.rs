//! Concurrency keys (PostgreSQL, only when named; `scripts/bench keys`): BENCH_KEYS (10,000)
//! keys × BENCH_KEYS_EACH (10) IMMEDIATE jobs, interleaved (job `i` is key `i % keys`), created
//! through the API (`POST /jobs/batch`, 1,000 a request) before a `worker,scheduler` process
//! starts with the service's defaults, each job an HTTP POST to nginx in its own process; timed
//! from the worker's start until every execution is SUCCESS. The same jobs on an endpoint
//! without a key, on a database of their own, are the yardstick: the keyed drain, one
//! execution of a key in flight at a time (`max_in_flight: 1`), should reach at least half its
//! rate (issue 46). BENCH_KEYS_ROUNDS (1) pairs, alternating which goes first.

use serde_json::{json, Value};

use super::{post, round2, settle, side_by_side_server_url, start_server, Nginx};
use crate::support::TestDb;

/// 1 while an execution waits (for its time or its key), is queued or runs, else 0.
const UNFINISHED: &str = "SELECT CASE WHEN EXISTS (SELECT 1 FROM executions WHERE status = 'PENDING')
                                OR EXISTS (SELECT 1 FROM executions WHERE status IN ('QUEUED', 'RETRYING'))
                                OR EXISTS (SELECT 1 FROM executions WHERE status = 'RUNNING') THEN 1::int8 ELSE 0::int8 END";

pub async fn keys(keys: usize, each: usize) -> Value {
    let nginx = Nginx::start();
    let rounds = super::env_usize("BENCH_KEYS_ROUNDS", 1);
    let mut runs = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        let mut pair = serde_json::Map::new();
        for keyed in order {
            let run = drain(keys, each, keyed, &nginx).await;
            eprintln!("keys: {run}");
            pair.insert(if keyed { "keyed" } else { "plain" }.into(), run);
        }
        let rate = |name: &str| pair[name]["executions_per_second"].as_f64().unwrap();
        let ratio = round2(rate("keyed") / rate("plain"));
        pair.insert("keyed_to_plain".into(), json!(ratio));
        runs.push(Value::Object(pair));
    }
    json!({"keys": keys, "executions_per_key": each, "max_in_flight": 1, "receiver": "nginx (1 worker process)", "runs": runs})
}

/// One drain of `keys` × `each` jobs, keyed (`max_in_flight: 1`, `fifo`) or not.
async fn drain(keys: usize, each: usize, keyed: bool, nginx: &Nginx) -> Value {
    let db = TestDb::postgres_on(&side_by_side_server_url()).await;
    let server = start_server(&db, "api", &[]).await;
    let api = server.client();
    let concurrency = if keyed { json!({"key": "{{input.customer}}", "ordering": "fifo"}) } else { Value::Null };
    post(
        &api,
        "/endpoints",
        &json!({"name": "bench", "type": "HTTP", "concurrency": concurrency, "spec": {
            "url": nginx.url, "method": "POST", "body_template": {"customer": "{{input.customer}}", "n": "{{input.n}}"}
        }}),
    )
    .await;
    let n = keys * each;
    let created = std::time::Instant::now();
    for from in (0..n).step_by(1000) {
        let jobs: Vec<Value> = (from..n.min(from + 1000))
            .map(|i| {
                json!({"endpoint": "bench", "trigger": "IMMEDIATE", "idempotency_key": format!("k{i}"),
                       "input": {"customer": format!("c{}", i % keys), "n": i}})
            })
            .collect();
        post(&api, "/jobs/batch", &json!({ "jobs": jobs })).await;
    }
    let create_seconds = created.elapsed().as_secs_f64();
    settle();
    let started_ms = chrono::Utc::now().timestamp_millis();
    let worker = start_server(&db, "worker,scheduler", &[]).await;
    super::drained(&db, UNFINISHED, n).await;
    if keyed {
        // One at a time per key, in order: each key's executions started in the order of
        // their jobs, none before the one ahead of it had finished.
        let overlapping = db
            .scalar(
                "SELECT COUNT(*) FROM (
                     SELECT started_at, LAG(completed_at) OVER (PARTITION BY concurrency_key ORDER BY run_at, execution_id) AS before
                     FROM executions) AS t
                 WHERE started_at < before",
            )
            .await;
        assert_eq!(overlapping, 0, "a key's execution started before the one ahead of it finished");
    }
    let last_ms = db.scalar("SELECT (EXTRACT(EPOCH FROM MAX(completed_at)) * 1000)::bigint FROM executions").await;
    let seconds = (last_ms - started_ms) as f64 / 1000.0;
    drop(worker);
    json!({"keyed": keyed, "executions": n, "create_seconds": round2(create_seconds), "seconds": round2(seconds),
           "executions_per_second": (n as f64 / seconds).round()})
}
