//! Several `taskexec` processes on one database: claims are exactly-once, schedulers never
//! double a tick and catch up after downtime, a killed worker's execution is reclaimed when its
//! lease expires, a cancel racing a claim has one winner, and SIGTERM drains.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, wait_for_status};
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

both_backends!(
    two_schedulers_never_create_a_tick_twice,
    scheduler_catches_up_missed_ticks,
    killed_worker_execution_is_reclaimed_and_completes,
    cancel_racing_claims_has_one_winner,
    sigterm_lets_in_flight_deliveries_finish,
    worker_and_scheduler_processes_answer_health_on_their_own_address,
);

fn api_only() -> ServerOptions {
    ServerOptions::new().env("TE_ROLES", "api")
}

fn workers() -> ServerOptions {
    ServerOptions::new().roles("worker", "Worker running.")
}

/// Two worker processes of 20 slots each.
async fn two_workers_of_20(db: &TestDb) -> [Server; 2] {
    let options = workers().env("TE_WORKER_MAX_CONCURRENT", "20");
    [Server::start_with(db, options.clone()).await, Server::start_with(db, options).await]
}

/// `n` IMMEDIATE jobs of `endpoint` in one batch, keyed `{prefix}{i}`.
async fn create_immediate(api: &Client, endpoint: &str, prefix: &str, n: i64) {
    let jobs: Vec<Value> = (0..n)
        .map(|i| json!({"endpoint": endpoint, "trigger": "IMMEDIATE", "idempotency_key": format!("{prefix}{i}")}))
        .collect();
    api.post("/jobs/batch", &json!({ "jobs": jobs })).await;
}

fn schedulers() -> ServerOptions {
    ServerOptions::new().roles("scheduler", "Scheduler running.")
}

async fn executions_of(api: &Client, job_id: &str) -> Vec<Value> {
    let (items, _) = api.list_all(&format!("/jobs/{job_id}/executions"), 200).await;
    items
}

fn tick_times(executions: &[Value]) -> Vec<DateTime<Utc>> {
    let mut ticks: Vec<DateTime<Utc>> =
        executions.iter().map(|e| e["run_at"].as_str().unwrap().parse().unwrap()).collect();
    ticks.sort();
    ticks
}

fn assert_consecutive_seconds(ticks: &[DateTime<Utc>]) {
    assert!(
        ticks.windows(2).all(|w| w[1] - w[0] == chrono::Duration::seconds(1)),
        "not one execution per second: {ticks:?}"
    );
}

/// PostgreSQL only: it is the backend that runs many workers against one database (SQLite
/// is the single-node embedded mode, where one process has all the roles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_worker_processes_deliver_2000_executions_exactly_once() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "bulk", "/ok/bulk", json!({"max_attempts": 3})).await;

    // Queue everything first, so the workers start with a full queue and contend for it.
    let total = 2000;
    let mut created = 0;
    let indexes: Vec<usize> = (0..total).collect();
    for chunk in indexes.chunks(32) {
        let batch: Vec<_> = chunk
            .iter()
            .map(|&i| {
                let api = api.clone();
                tokio::spawn(async move {
                    api.post(
                        "/jobs",
                        &immediate("bulk", &format!("bulk-{i}"), json!({"user_id": format!("u{i}"), "amount": 1})),
                    )
                    .await
                    .status
                })
            })
            .collect();
        for task in batch {
            assert_eq!(task.await.unwrap(), 201);
            created += 1;
        }
    }
    assert_eq!(created, total);

    let options = workers().env("TE_WORKER_MAX_CONCURRENT", "50");
    let mut fleet = Vec::new();
    for _ in 0..4 {
        fleet.push(Server::start_with(&db, options.clone()).await);
    }
    eventually("every execution to succeed", Duration::from_secs(120), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == total as i64
    })
    .await;

    let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
    for request in receiver.received() {
        *per_key.entry(request.header("idempotency-key").unwrap()).or_default() += 1;
    }
    assert_eq!(per_key.len(), total, "every execution reached the receiver");
    assert!(per_key.values().all(|n| *n == 1), "an execution was delivered twice");
    assert_eq!(db.scalar("SELECT MAX(attempt_count)::BIGINT FROM executions").await, 1);
    assert_eq!(db.scalar("SELECT COUNT(*) FROM attempts").await, total as i64);
    // The work really was shared: several workers' ids appear in the attempt logs.
    let workers_seen = db.scalar("SELECT COUNT(DISTINCT substring(message FROM 'on (worker-[^.]+)')) FROM execution_logs WHERE message LIKE 'Attempt 1 of%'").await;
    assert!(workers_seen >= 2, "only {workers_seen} worker(s) claimed work");
}

async fn two_schedulers_never_create_a_tick_twice(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let _a = Server::start_with(&db, schedulers()).await;
    let _b = Server::start_with(&db, schedulers()).await;
    let job = api.create("/jobs", &json!({"endpoint": "tick", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"user_id": "u", "amount": 1}})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("six ticks", Duration::from_secs(30), || async { executions_of(&api, &job_id).await.len() >= 6 }).await;
    api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await;
    let executions = executions_of(&api, &job_id).await;
    let ticks = tick_times(&executions);
    let distinct: BTreeSet<_> = ticks.iter().collect();
    assert_eq!(distinct.len(), ticks.len(), "a tick was created twice");
    assert_consecutive_seconds(&ticks);
    // The ticks started at the job's first scheduled tick, with none skipped.
    assert_eq!(ticks[0], job["next_run_at"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap());
}

/// A cron job created through an `api` process wakes the scheduler in another at once (a
/// NOTIFY), so its first tick is made ahead of time, not at the scheduler's next pass: here
/// that pass is an hour away. PostgreSQL only (SQLite is one process with every role).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_created_through_another_process_wakes_the_scheduler() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let _scheduler = Server::start_with(
        &db,
        ServerOptions::new()
            .roles("scheduler", "Cron materializer listens for cron job changes (LISTEN/NOTIFY).")
            .env("TE_CRON_TICK_INTERVAL_SEC", "3600"),
    )
    .await;
    let job = api.create("/jobs", &json!({"endpoint": "tick", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"user_id": "u", "amount": 1}})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    eventually("the new job's first tick", Duration::from_secs(20), || async {
        !executions_of(&api, &job_id).await.is_empty()
    })
    .await;
}

async fn scheduler_catches_up_missed_ticks(backend: Backend) {
    let db = TestDb::new(backend).await;
    // No scheduler runs while the ticks come due.
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "tick", "/ok/tick", json!(null)).await;
    let job = api.create("/jobs", &json!({"endpoint": "tick", "trigger": "CRON", "cron": "* * * * * *", "timezone": "UTC", "input": {"user_id": "u", "amount": 1}})).await;
    let job_id = job["job_id"].as_str().unwrap().to_owned();
    let first: DateTime<Utc> = job["next_run_at"].as_str().unwrap().parse().unwrap();
    let missed = 5;
    let down_until = first + chrono::Duration::seconds(missed);
    eventually("the scheduler's downtime to pass five ticks", Duration::from_secs(30), || async {
        Utc::now() > down_until
    })
    .await;
    assert!(executions_of(&api, &job_id).await.is_empty(), "nothing ran without a scheduler");

    let _scheduler = Server::start_with(&db, schedulers()).await;
    eventually("the missed ticks to be materialized", Duration::from_secs(30), || async {
        tick_times(&executions_of(&api, &job_id).await).iter().filter(|t| **t <= down_until).count()
            == missed as usize + 1
    })
    .await;
    let ticks = tick_times(&executions_of(&api, &job_id).await);
    assert_eq!(ticks[0], first, "catch-up starts at the first missed tick");
    assert_consecutive_seconds(&ticks);
}

async fn killed_worker_execution_is_reclaimed_and_completes(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(
        &db,
        ServerOptions::new().env("TE_ROLES", "api,scheduler").env("TE_RECLAIM_INTERVAL_SEC", "1"),
    )
    .await;
    let api = server.client();
    let receiver = Receiver::start().await;
    // The first request hangs (a minute): the worker is mid-delivery when it dies, holding a
    // three-second lease it will never renew.
    http_endpoint(&api, &receiver, "hang", "/slow-once/crash/60000", json!({"max_attempts": 3})).await;
    let doomed = Server::start_with(&db, workers().env("TE_WORKER_LEASE_SEC", "3")).await;
    let job = api.create("/jobs", &immediate("hang", "crash", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    eventually("the first delivery to be in flight", Duration::from_secs(30), || async { receiver.count() == 1 }).await;
    doomed.kill9();

    wait_for_status(&api, &execution_id, "RETRYING").await;
    let _rescuer = Server::start_with(&db, workers()).await;
    let execution = wait_for_status(&api, &execution_id, "SUCCESS").await;
    assert_eq!(execution["attempt_count"], 2);
    let attempts =
        api.get(&format!("/executions/{execution_id}/attempts")).await.body["items"].as_array().unwrap().clone();
    assert_eq!(attempts.len(), 2);
    assert_eq!(
        (attempts[0]["status"].as_str(), attempts[0]["error"]["type"].as_str()),
        (Some("FAILED"), Some("WORKER_LOST"))
    );
    assert_eq!(attempts[1]["status"], "SUCCESS");
    // At-least-once: the receiver saw the delivery twice, under one idempotency key.
    let keys: BTreeSet<_> = receiver.received().iter().map(|r| r.header("idempotency-key").unwrap()).collect();
    assert_eq!((receiver.count(), keys.len()), (2, 1));
}

async fn cancel_racing_claims_has_one_winner(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "race", "/ok/race", json!(null)).await;
    let mut executions = Vec::new();
    for i in 0..150 {
        let job =
            api.create("/jobs", &immediate("race", &format!("race-{i}"), json!({"user_id": "u", "amount": 1}))).await;
        executions.push(job["execution"]["execution_id"].as_str().unwrap().to_owned());
    }
    // A worker starts claiming while every execution is cancelled at once.
    let _worker = Server::start_with(&db, workers().env("TE_WORKER_MAX_CONCURRENT", "8")).await;
    let cancels: Vec<_> = executions
        .iter()
        .map(|id| {
            let api = api.clone();
            let id = id.clone();
            tokio::spawn(async move {
                (id.clone(), api.post(&format!("/executions/{id}/cancel"), &json!({})).await.status.as_u16())
            })
        })
        .collect();
    let mut cancelled = BTreeSet::new();
    let mut refused = BTreeSet::new();
    for task in cancels {
        let (id, status) = task.await.unwrap();
        match status {
            200 => cancelled.insert(id),
            409 => refused.insert(id),
            other => panic!("cancel answered {other}"),
        };
    }
    eventually("every uncancelled execution to finish", Duration::from_secs(60), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status NOT IN ('SUCCESS', 'CANCELLED')").await == 0
    })
    .await;
    let delivered: BTreeSet<String> =
        receiver.received().iter().map(|r| r.header("idempotency-key").unwrap()).collect();
    assert!(cancelled.is_disjoint(&delivered), "a cancelled execution was delivered");
    assert_eq!(delivered, refused, "exactly the executions whose cancel lost were delivered");
    assert_eq!(cancelled.len() + refused.len(), executions.len());
    assert_eq!(db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'CANCELLED'").await, cancelled.len() as i64);
}

async fn sigterm_lets_in_flight_deliveries_finish(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    http_endpoint(&api, &receiver, "slow", "/slow-once/drain/2000", json!(null)).await;
    let worker = Server::start_with(&db, workers().env("TE_WORKER_SHUTDOWN_TIMEOUT_SEC", "30")).await;
    let job = api.create("/jobs", &immediate("slow", "drain", json!({"user_id": "u", "amount": 1}))).await;
    let execution_id = job["execution"]["execution_id"].as_str().unwrap().to_owned();
    eventually("the delivery to be in flight", Duration::from_secs(30), || async { receiver.count() == 1 }).await;
    let (status, output) = worker.terminate();
    assert!(status.success(), "{status}: {output}");
    assert!(output.contains("Waiting for in-flight deliveries."), "{output}");
    // The delivery finished and was recorded before the process left.
    assert_eq!(api.get(&format!("/executions/{execution_id}")).await.body["status"], "SUCCESS");
}

/// Processes without the API role serve `/healthz` and `/readyz` on `TE_HEALTH_ADDR`, and
/// `/healthz` names each of the process's loops and says it is alive.
async fn worker_and_scheduler_processes_answer_health_on_their_own_address(backend: Backend) {
    let db = TestDb::new(backend).await;
    let health = |roles: &str| {
        ServerOptions::new().roles(roles, "Health endpoint listening.").env("TE_HEALTH_ADDR", "127.0.0.1:0")
    };
    for (roles, loops) in [
        ("worker", vec!["worker.claimer", "worker.lease_keeper"]),
        ("scheduler", vec!["scheduler.cron_materializer", "scheduler.promoter", "scheduler.reclaimer"]),
    ] {
        let process = Server::start_with(&db, health(roles)).await;
        let client = Client::new(&process.base_url, None);
        eventually(&format!("the {roles} loops to report"), Duration::from_secs(30), || {
            let client = client.clone();
            let loops = loops.clone();
            async move {
                let r = client.get("/healthz").await;
                let reported: Vec<&str> = r.body["loops"]
                    .as_array()
                    .map(|l| l.iter().filter_map(|l| l["name"].as_str()).collect())
                    .unwrap_or_default();
                r.status == 200 && loops.iter().all(|name| reported.contains(name))
            }
        })
        .await;
        let r = client.get("/healthz").await;
        assert_eq!(r.body["status"], "ok", "{}", r.text);
        assert!(
            r.body["loops"].as_array().unwrap().iter().all(|l| l["alive"] == true && l["state"] == "running"),
            "{}",
            r.text
        );
        assert_eq!(client.get("/readyz").await.body["status"], "ready");
        let metrics = client.get("/metrics").await;
        assert_eq!(metrics.status, 200, "{}", metrics.text);
        let expected = if roles == "worker" {
            "taskexec_worker_slots_capacity"
        } else {
            "taskexec_scheduler_loop_duration_seconds"
        };
        assert!(metrics.text.contains(expected), "{}", metrics.text);
        // Nothing but health is served there.
        assert_eq!(client.get("/jobs").await.status, 404);
        let output = process.stop();
        assert!(output.contains("Stopped."), "{output}");
    }
}

/// An endpoint's `max_concurrency` holds across worker processes: three workers with 20 slots
/// each, claiming at once as work arrives, never run more than 2 of its deliveries at once
/// between them. (Without the claims taking turns on the endpoint's row they ran 3 and 4.)
/// PostgreSQL only: an embedded SQLite database has one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrency_holds_across_worker_processes() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({"name": "capped", "type": "HTTP", "max_concurrency": 2,
                "spec": {"url": format!("{}/slow/200", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let options = workers().env("TE_WORKER_MAX_CONCURRENT", "20");
    let mut fleet = Vec::new();
    for _ in 0..3 {
        fleet.push(Server::start_with(&db, options.clone()).await);
    }
    let total = 30;
    for i in 0..total {
        api.create("/jobs", &json!({"endpoint": "capped", "trigger": "IMMEDIATE", "idempotency_key": format!("c{i}")}))
            .await;
    }
    eventually("every execution to succeed", Duration::from_secs(60), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == total
    })
    .await;
    assert_eq!(receiver.most_slow_at_once(), 2, "max_concurrency at once, never more, across the workers");
    let running = db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'RUNNING'").await;
    assert_eq!(running, 0);
    drop(fleet);
}

/// An endpoint's rate limit holds across worker processes: two workers with 20 slots each
/// deliver 30 jobs to an endpoint limited to 10 a second (burst 2) no faster than that.
/// PostgreSQL only: an embedded SQLite database has one process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_worker_processes() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({"name": "metered", "type": "HTTP", "rate_limit": {"per_second": 10, "burst": 2},
                "spec": {"url": format!("{}/ok/metered", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let fleet = two_workers_of_20(&db).await;
    let total = 30;
    create_immediate(&api, "metered", "r", total).await;
    eventually("every execution to succeed", Duration::from_secs(60), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == total
    })
    .await;
    let arrivals = receiver.arrivals();
    let spread = *arrivals.iter().max().unwrap() - *arrivals.iter().min().unwrap();
    // 30 at 10 a second, 2 at once at most: no sooner than (30 - 2) / 10 s.
    assert!(spread >= chrono::Duration::milliseconds(2700), "took {spread}");
    let most = crate::e2e_recovery::most_within(&arrivals, chrono::Duration::seconds(1));
    assert!(most <= 12, "at most 10 a second and a burst of 2 in any second, saw {most}: {arrivals:?}");
    eprintln!("rate limit 10/s burst 2, two workers: 30 delivered over {spread}, at most {most} in any second");
    drop(fleet);
}

/// An endpoint's circuit breaker holds across worker processes: once three failures open it,
/// two workers with 20 slots each send nothing during a cool-down and, half-open, one probe
/// between them, never two at once. PostgreSQL only: an embedded SQLite database has one
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_circuit_breaker_holds_across_worker_processes() {
    let db = TestDb::new(Backend::Postgres).await;
    let server = Server::start_with(&db, api_only()).await;
    let api = server.client();
    let receiver = Receiver::start().await;
    api.create(
        "/endpoints",
        &json!({"name": "shaky", "type": "HTTP",
                "retry_policy": {"max_attempts": 100, "backoff": "fixed", "initial_delay_ms": 50},
                "circuit_breaker": {"failure_threshold": 3, "cooldown_ms": 1000, "max_cooldown_ms": 1000},
                "spec": {"url": format!("{}/switch/shaky", receiver.base_url), "method": "POST"}}),
    )
    .await;
    let fleet = two_workers_of_20(&db).await;
    let total = 20;
    create_immediate(&api, "shaky", "s", total).await;
    eventually("the circuit opens", Duration::from_secs(30), || async {
        api.get("/endpoints/shaky").await.body["circuit"]["state"] == "open"
    })
    .await;
    // Three cool-downs of failed probes, then the receiver recovers.
    eventually("three probes after the first burst", Duration::from_secs(30), || async {
        let arrivals = receiver.arrivals();
        arrivals.windows(2).filter(|w| w[1] - w[0] >= chrono::Duration::milliseconds(900)).count() >= 3
    })
    .await;
    let healed_at = Utc::now();
    receiver.heal("shaky");
    eventually("every execution to succeed", Duration::from_secs(60), || async {
        db.scalar("SELECT COUNT(*) FROM executions WHERE status = 'SUCCESS'").await == total
    })
    .await;
    let mut failures: Vec<DateTime<Utc>> = receiver.arrivals().into_iter().filter(|at| *at < healed_at).collect();
    failures.sort();
    let gaps: Vec<chrono::Duration> = failures.windows(2).map(|w| w[1] - w[0]).collect();
    let cooled = gaps.iter().position(|g| *g >= chrono::Duration::milliseconds(900)).expect("a cool-down");
    assert!(
        gaps[cooled..].iter().all(|g| *g >= chrono::Duration::milliseconds(900)),
        "after the circuit opened, one probe per cool-down across both workers: {gaps:?}"
    );
    eprintln!(
        "circuit breaker, two workers: {} failed deliveries before it opened, then {} probes, one per cool-down",
        cooled + 1,
        gaps.len() - cooled
    );
    assert_eq!(api.get("/endpoints/shaky").await.body["circuit"]["state"], "closed");
    drop(fleet);
}
