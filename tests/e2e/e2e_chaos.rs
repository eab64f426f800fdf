//! The fault-injection suite: worker processes killed with `kill -9` at random moments under
//! load, PostgreSQL restarted under a running service, and receivers that break HTTP the ways
//! a hostile peer does. Each test says what must hold; docs/reliability.md lists them.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::Rng;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{
    eventually, Backend, Client, HostileReceiver, PrivatePostgres, Receiver, Server, ServerOptions, TestDb,
};

both_backends!(killed_workers_lose_nothing, hostile_receivers_fail_or_truncate_and_never_stick);

/// Create `total` IMMEDIATE jobs for `endpoint`, 32 at a time; their execution ids.
async fn create_jobs(api: &Client, endpoint: &str, prefix: &str, total: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(total);
    let indexes: Vec<usize> = (0..total).collect();
    for chunk in indexes.chunks(32) {
        let tasks: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let api = api.clone();
                let (endpoint, key) = (endpoint.to_owned(), format!("{prefix}-{i}"));
                tokio::spawn(async move {
                    let job =
                        api.create("/jobs", &immediate(&endpoint, &key, json!({"user_id": "u", "amount": 1}))).await;
                    job["execution"]["execution_id"].as_str().unwrap().to_owned()
                })
            })
            .collect();
        for task in tasks {
            ids.push(task.await.unwrap());
        }
    }
    ids
}

/// (attempt_count, error types of failed attempts) per execution id, read from the database.
async fn attempts_by_execution(db: &TestDb) -> BTreeMap<String, (i64, Vec<String>)> {
    let counts = db.texts("SELECT execution_id || ' ' || CAST(attempt_count AS TEXT) FROM executions").await;
    let mut by_id: BTreeMap<String, (i64, Vec<String>)> = counts
        .iter()
        .map(|row| {
            let (id, n) = row.split_once(' ').unwrap();
            (id.to_owned(), (n.parse().unwrap(), Vec::new()))
        })
        .collect();
    let failures = db
        .texts(
            "SELECT execution_id || ' ' || CAST(error AS TEXT) FROM attempts WHERE status <> 'SUCCESS' ORDER BY attempt_number",
        )
        .await;
    for row in failures {
        let (id, error) = row.split_once(' ').unwrap();
        let error: Value = serde_json::from_str(error).unwrap();
        by_id.get_mut(id).unwrap().1.push(error["type"].as_str().unwrap_or_default().to_owned());
    }
    by_id
}

/// Deliveries the receiver saw, per idempotency key (the execution id). A request without the
/// header is not one of this test's deliveries (every HTTP delivery carries it; the callers
/// check that each execution's key arrived): the whole suite runs in parallel, and a port
/// this receiver was given may have served another test before. It is reported, not counted.
fn deliveries(receiver: &Receiver) -> BTreeMap<String, i64> {
    let mut per_key = BTreeMap::new();
    for request in receiver.received() {
        match request.header("idempotency-key") {
            Some(key) => *per_key.entry(key).or_default() += 1,
            None => {
                eprintln!("a request without an idempotency key, not counted: {} {:?}", request.path, request.headers)
            }
        }
    }
    per_key
}

/// 5,000 executions drain while worker processes are killed with SIGKILL at random moments,
/// ten times, and replaced. Every execution ends SUCCESS; the receiver saw every one; an
/// execution was delivered more than once only where a kill fell between delivery and record,
/// which its attempts show (a `WORKER_LOST` attempt for each extra delivery).
///
/// PostgreSQL: an API and scheduler process, and three worker processes of which a random one
/// is killed each time. SQLite is one node: its one process (every role) is killed and started
/// again.
async fn killed_workers_lose_nothing(backend: Backend) {
    const TOTAL: usize = 5000;
    const KILLS: usize = 10;
    let db = TestDb::new(backend).await;
    let receiver = Receiver::start().await;
    // Short leases, so a killed worker's executions come back within seconds.
    let worker = ServerOptions::new()
        .env("TE_WORKER_LEASE_SEC", "3")
        .env("TE_RECLAIM_INTERVAL_SEC", "1")
        .env("TE_WORKER_MAX_CONCURRENT", "8");
    // The jobs are queued first, with no worker running, so the drain starts full.
    let queuer = Server::start_with(&db, worker.clone().env("TE_ROLES", "api,scheduler")).await;
    let api = queuer.client();
    // Each delivery takes 20 ms at the receiver, so the drain lasts long enough to be hit.
    http_endpoint(&api, &receiver, "chaos", "/slow/20", json!({"max_attempts": 20, "initial_delay_ms": 100})).await;
    let ids = create_jobs(&api, "chaos", "chaos", TOTAL).await;
    let (front, mut workers) = match backend {
        Backend::Postgres => {
            let mut fleet = Vec::new();
            for _ in 0..3 {
                fleet.push(Server::start_with(&db, worker.clone().roles("worker", "Worker running.")).await);
            }
            (Some(queuer), fleet)
        }
        Backend::Sqlite => {
            queuer.stop();
            (None, vec![Server::start_with(&db, worker.clone()).await])
        }
    };
    let mut rng = rand::thread_rng();
    for kill in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(150..600))).await;
        let victim = rng.gen_range(0..workers.len());
        workers.swap_remove(victim).kill9();
        let replacement = match backend {
            Backend::Postgres => worker.clone().roles("worker", "Worker running."),
            Backend::Sqlite => worker.clone(),
        };
        workers.push(Server::start_with(&db, replacement).await);
        eprintln!("kill {} of {KILLS} done; {} deliveries so far", kill + 1, receiver.count());
    }
    // The API of a restarted single node has a new port.
    let api = front.as_ref().map_or_else(|| workers[0].client(), |f| f.client());
    eventually("every execution to succeed", Duration::from_secs(240), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == TOTAL as i64
    })
    .await;

    let delivered = deliveries(&receiver);
    let attempts = attempts_by_execution(&db).await;
    assert_eq!(attempts.len(), TOTAL);
    let mut duplicated = 0;
    for id in &ids {
        let seen = delivered.get(id).copied().unwrap_or(0);
        let (attempt_count, failures) = &attempts[id];
        assert!(seen >= 1, "{id} never reached the receiver");
        assert!(
            failures.iter().all(|t| t == "WORKER_LOST"),
            "{id}: attempts failed other than by a kill: {failures:?}"
        );
        assert_eq!(failures.len() as i64, attempt_count - 1, "{id}: every attempt but the last was lost to a kill");
        assert!(
            seen <= *attempt_count,
            "{id} was delivered {seen} times in {attempt_count} attempts: a duplicate without a kill"
        );
        duplicated += usize::from(seen > 1);
    }
    assert!(
        attempts.values().any(|(n, _)| *n > 1),
        "no kill fell on an attempt in flight; the test did not test anything"
    );
    eprintln!("{duplicated} of {TOTAL} executions were delivered more than once (each after a kill)");
    assert_eq!(api.get("/healthz").await.status, 200);
}

/// PostgreSQL stopped (fast shutdown: every connection cut) while deliveries are in flight and
/// results are being written, then started again seconds later. Nothing is lost and no manual
/// step is needed: every execution ends SUCCESS, each delivered once; an attempt that found
/// the database gone before it sent is recorded as `STORE_UNAVAILABLE` and retried.
/// PostgreSQL only: it is the backend that is a server to restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_mid_delivery_and_mid_batch_loses_nothing() {
    let postgres = PrivatePostgres::start();
    let db = TestDb::postgres_on(&postgres.admin_url()).await;
    let front = Server::start_with(&db, ServerOptions::new().env("TE_ROLES", "api,scheduler")).await;
    let api = front.client();
    let receiver = Receiver::start().await;
    let retry = json!({"max_attempts": 5, "initial_delay_ms": 100});
    // Mid-delivery: these hold the receiver for 3 s, so their results come back while the
    // database is down. Mid-batch: a queue of quick ones is being claimed and recorded.
    http_endpoint(&api, &receiver, "slow", "/slow/3000", retry.clone()).await;
    http_endpoint(&api, &receiver, "quick", "/slow/20", retry).await;
    let slow = create_jobs(&api, "slow", "slow", 10).await;
    let quick = create_jobs(&api, "quick", "quick", 1000).await;
    let worker = Server::start_with(
        &db,
        ServerOptions::new().roles("worker", "Worker running.").env("TE_WORKER_MAX_CONCURRENT", "30"),
    )
    .await;
    eventually("slow deliveries in flight and quick ones flowing", Duration::from_secs(30), || async {
        let received = receiver.received();
        received.iter().filter(|r| r.path == "/slow/3000").count() == slow.len()
            && received.iter().filter(|r| r.path == "/slow/20").count() >= 50
    })
    .await;
    postgres.stop();
    let down_at = receiver.count();
    // Down past the moment the slow deliveries answer (3 s).
    tokio::time::sleep(Duration::from_secs(5)).await;
    postgres.start_again();

    eventually("every execution to succeed", Duration::from_secs(120), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == 1010
    })
    .await;
    let delivered = deliveries(&receiver);
    assert_eq!(delivered.len(), slow.len() + quick.len(), "every execution reached the receiver");
    let twice: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once across the restart: {twice:?}");
    for (id, (_, failures)) in attempts_by_execution(&db).await {
        assert!(failures.iter().all(|t| t == "STORE_UNAVAILABLE"), "{id}: {failures:?}");
    }
    for id in &slow {
        assert_eq!(wait_for_status(&api, id, "SUCCESS").await["attempt_count"], 1, "{id}");
    }
    assert!(down_at < 1010, "the database went down with deliveries still to make");
    eprintln!("{down_at} deliveries before the restart, {} after", receiver.count() - down_at);
    // This PostgreSQL runs with autovacuum on (its default): no warning about it at start.
    assert!(!front.output_text().contains("autovacuum is off"), "{}", front.output_text());
    drop(worker);
}

/// Receivers that drip, never end, reset, flood or send bytes that are not text: each attempt
/// ends by its timeout or with a bounded, flagged output, never stuck, and a well-behaved
/// endpoint beside them keeps delivering.
async fn hostile_receivers_fail_or_truncate_and_never_stick(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let api = server.client();
    let hostile = HostileReceiver::start().await;
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "fine", "/ok/fine", json!(null)).await;
    for path in ["drip", "endless", "reset", "big", "many-headers", "bad-utf8"] {
        api.create(
            "/endpoints",
            &json!({"name": path, "type": "HTTP",
                    "spec": {"url": format!("{}/{path}", hostile.base_url), "method": "POST", "timeout_ms": 2000}}),
        )
        .await;
    }
    let run = |endpoint: &'static str| {
        let api = api.clone();
        async move {
            let job = api.create("/jobs", &immediate(endpoint, endpoint, json!({"user_id": "u", "amount": 1}))).await;
            job["execution"]["execution_id"].as_str().unwrap().to_owned()
        }
    };
    let drip = run("drip").await;
    let endless = run("endless").await;
    let reset = run("reset").await;
    let big = run("big").await;
    let many_headers = run("many-headers").await;
    let bad_utf8 = run("bad-utf8").await;
    let fine = run("fine").await;

    // A body dripped a byte a second: the timeout ends it.
    let failed = finished(&api, &drip, "FAILED").await;
    assert_eq!(failed["output"]["error"]["type"], "TIMEOUT", "{failed}");
    // A body that never ends, or one of 10 MB: the first 64 KiB are kept, and flagged.
    for id in [&endless, &big] {
        let done = finished(&api, id, "SUCCESS").await;
        assert_eq!(done["output"]["body"].as_str().unwrap().len(), 64 * 1024, "{id}");
        assert_eq!(done["output"]["body_truncated"], true);
    }
    // A reset after the headers: a connection error, retryable, naming the cause.
    let failed = finished(&api, &reset, "FAILED").await;
    assert_eq!(failed["output"]["error"]["type"], "CONNECTION_ERROR", "{failed}");
    assert_eq!(failed["output"]["error"]["retryable"], true);
    // 1,000 headers: refused by the HTTP client's header limit, said plainly.
    let failed = finished(&api, &many_headers, "FAILED").await;
    let message = failed["output"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("too large") || message.contains("header"), "{message}");
    // Bytes that are not text, NUL among them: stored as text, invalid bytes replaced.
    let done = finished(&api, &bad_utf8, "SUCCESS").await;
    assert_eq!(done["output"]["body"], "bad \u{FFFD}\u{FFFD} and \u{FFFD} nul");
    finished(&api, &fine, "SUCCESS").await;
    for path in ["/drip", "/endless", "/reset", "/big", "/many-headers", "/bad-utf8"] {
        assert_eq!(hostile.count(path), 1, "{path} was asked once (max_attempts 1)");
    }
    // Nothing is left running, and the service answers.
    assert_eq!(db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'RUNNING'").await, 0);
    assert_eq!(api.get("/healthz").await.status, 200);
    let stored = db.scalar("SELECT CAST(COALESCE(MAX(LENGTH(CAST(output AS TEXT))), 0) AS BIGINT) FROM attempts").await;
    assert!(stored < 80 * 1024, "an attempt stored {stored} bytes of output");
}

/// Wait (30 s at most) for execution `id` to end, and assert it ended `status`; the execution.
async fn finished(api: &Client, id: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let execution = api.get(&format!("/executions/{id}")).await.body;
        if matches!(execution["status"].as_str(), Some("SUCCESS" | "FAILED" | "CANCELLED")) {
            assert_eq!(execution["status"], status, "{execution}");
            return execution;
        }
        assert!(std::time::Instant::now() < deadline, "{id} did not finish: {execution}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}
