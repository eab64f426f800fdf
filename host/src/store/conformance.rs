//! The store contract, proven on both backends: one suite of async checks over `&dyn Store`,
//! run against a fresh PostgreSQL database and a fresh SQLite file (in the spirit of River's
//! `riverdrivertest`). What the engine relies on from any backend is asserted here, below the
//! API: exclusive claims under concurrency, fenced finishes, leases from the database's clock,
//! cron ticks recorded once, idempotent inserts, page order, and batch result writes.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::domain::{AttemptStatus, EndpointType, ExecutionStatus, Trigger};
use crate::ids::{ExecutionId, JobId};

/// A migrated store of each backend, each on a database of its own; the guards keep them.
async fn stores() -> Vec<(Arc<dyn Store>, Box<dyn std::any::Any>)> {
    let stores = new_stores(None).await;
    for (store, _) in &stores {
        store.migrate().await.unwrap();
    }
    stores
}

/// A store of each backend on a database of its own, empty or with the migrations before
/// `before` applied (without the store's own migrate, which the caller runs when it wants):
/// rows written through the latter are as a database of that time holds them.
async fn new_stores(before: Option<i64>) -> Vec<(Arc<dyn Store>, Box<dyn std::any::Any>)> {
    use sqlx::migrate::Migrator;
    let until = |mut migrator: Migrator, version: i64| {
        migrator.migrations = migrator.migrations.iter().filter(|m| m.version < version).cloned().collect();
        migrator
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let sqlite: Arc<dyn Store> = Arc::new(sqlite::SqliteStore::connect(&path, 4).await.unwrap());
    if let Some(version) = before {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite:{}", path.display())).await.unwrap();
        until(sqlx::migrate!("../migrations/sqlite"), version).run(&pool).await.unwrap();
        pool.close().await;
    }

    let admin = std::env::var("TE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let name = format!("te_test_{}", uuid::Uuid::new_v4().simple());
    {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {admin} (scripts/test starts it): {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.unwrap();
    }
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    if let Some(version) = before {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        until(sqlx::migrate!("../migrations/postgres"), version).run(&pool).await.unwrap();
        pool.close().await;
    }
    let postgres: Arc<dyn Store> = Arc::new(postgres::PgStore::connect(&url, 8).await.unwrap());
    vec![(postgres, Box::new(DropDatabase { admin, name })), (sqlite, Box::new(dir))]
}

/// Attempts and log lines written before 0063 (which dropped their foreign keys and re-keyed
/// log lines by execution and time) read back the same after it, in order, and still go with
/// their execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_written_before_the_attempt_keys_changed_reads_the_same_after() {
    for (store, _guard) in new_stores(Some(63)).await {
        let backend = store.backend();
        endpoint(&*store, "a").await;
        queued(&*store, "a", 2).await;
        let held = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
        let mut first = finish(&held[0], ExecutionStatus::Success);
        let at = now();
        // The last two at one instant (as lines written before the worker spaced them a
        // microsecond apart could be): between those, the order is by id, before and after.
        first.logs = ["one", "two", "three"]
            .iter()
            .enumerate()
            .map(|(i, message)| LogWrite {
                level: "INFO",
                message: (*message).to_owned(),
                logged_at: at + chrono::Duration::milliseconds(i.min(1) as i64),
            })
            .collect();
        let written = store.execution_finish_many(&[first, finish(&held[1], ExecutionStatus::Failed)]).await.unwrap();
        assert_eq!(written, [true, true], "{backend:?}");
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        let before = store.log_list(&held[0].execution_id, &page).await.unwrap();

        store.migrate().await.unwrap();
        let after = store.log_list(&held[0].execution_id, &page).await.unwrap();
        let lines = |logs: &[ExecutionLog]| {
            logs.iter().map(|l| (l.log_id.to_string(), l.message.clone(), l.logged_at)).collect::<Vec<_>>()
        };
        assert_eq!(lines(&after), lines(&before), "{backend:?}");
        assert_eq!(after.len(), 3, "{backend:?}");
        assert_eq!(after[0].message, "one", "{backend:?}: the earliest first");
        // Paged one line at a time, the same three in the same order.
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = PageRequest { after: cursor.clone(), limit: 1, ..Default::default() };
            let got = store.log_list(&held[0].execution_id, &page).await.unwrap();
            let Some(last) = got.last() else { break };
            cursor = Some(PageKey { created_at: last.logged_at, key: last.log_id.to_string() });
            paged.extend(got);
        }
        assert_eq!(lines(&paged), lines(&after), "{backend:?}");
        for e in &held {
            let attempts = store.attempt_list(&e.execution_id, &page).await.unwrap();
            assert_eq!(attempts.len(), 1, "{backend:?}");
        }
        // Deleting the job takes its attempts and lines along: no key enforces it any more.
        assert!(matches!(store.job_delete(held[0].job_id.as_str()).await.unwrap(), Deleted::Deleted), "{backend:?}");
        assert!(store.attempt_list(&held[0].execution_id, &page).await.unwrap().is_empty(), "{backend:?}");
        assert!(store.log_list(&held[0].execution_id, &page).await.unwrap().is_empty(), "{backend:?}");
    }
}

/// PostgreSQL keeps the queue apart from its history, and history in time partitions that
/// retention drops whole (`store::partitions`); PostgreSQL only, since SQLite (and
/// CockroachDB) keep one table and purge by row, which the other retention checks cover.
/// Finished executions, their attempts and log lines in a span wholly older than the cutoff
/// go with their partitions; what has not run yet stays, whatever its age; what a converted
/// database held before, and what falls outside the partitions, the purge deletes by row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_partitions_are_made_ahead_and_dropped_whole_past_the_retention() {
    let (store, _guard) = stores().await.into_iter().find(|(s, _)| s.backend() == Backend::Postgres).unwrap();
    let window = Duration::from_secs(60);
    // Partitions over an hour ago, as a scheduler then would have made them.
    let then = {
        use chrono::DurationRound;
        (now() - chrono::Duration::hours(1)).duration_trunc(chrono::Duration::minutes(1)).unwrap()
            + chrono::Duration::seconds(20)
    };
    let made = store.history_upkeep(then, window, None, LONG_BUDGET).await.unwrap();
    assert_eq!(made.made.len(), 3 * 3, "three spans for each of the three tables: {:?}", made.made);
    assert!(store.history_upkeep(then, window, None, LONG_BUDGET).await.unwrap().made.is_empty(), "made once");
    let span = super::partitions::Partition::parse("executions_done", &made.made[0]).unwrap();
    let inside = span.from.unwrap() + chrono::Duration::seconds(1);

    endpoint(&*store, "a").await;
    // Two executions made inside the first span: one finished, one still waiting.
    let (mut ids, mut jobs) = (Vec::new(), Vec::new());
    for status in [ExecutionStatus::Queued, ExecutionStatus::Pending] {
        let j = job("a", Trigger::Immediate, None, inside);
        jobs.push(j.job_id.clone());
        let e = execution(
            &j,
            status,
            if status == ExecutionStatus::Queued { inside } else { now() + chrono::Duration::days(1) },
        );
        ids.push(e.execution_id.clone());
        store.job_insert(&j, Some(&e)).await.unwrap();
    }
    let held = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    assert_eq!(held[0].execution_id, ids[0]);
    let mut done = finish(&held[0], ExecutionStatus::Success);
    (done.started_at, done.completed_at) = (inside, inside);
    done.logs[0].logged_at = inside;
    assert_eq!(store.execution_finish_many(&[done]).await.unwrap(), [true]);
    let page = PageRequest { after: None, limit: 10, ..Default::default() };
    assert_eq!(store.attempt_list(&ids[0], &page).await.unwrap().len(), 1);
    assert_eq!(store.log_list(&ids[0], &page).await.unwrap().len(), 1);
    // One that failed inside the span and was retried since: its job stays with the retry.
    let retried_job = job("a", Trigger::Immediate, None, inside);
    let mut failed = execution(&retried_job, ExecutionStatus::Failed, inside);
    failed.idempotency_key = None;
    store.job_insert(&retried_job, Some(&failed)).await.unwrap();
    let retry = ExecutionWrite {
        execution_id: ExecutionId::new(),
        idempotency_key: Some(format!("{RETRY_KEY_PREFIX}{}", failed.execution_id)),
        retry_of: Some(failed.execution_id.clone()),
        created_at: now(),
        ..execution(&retried_job, ExecutionStatus::Pending, now() + chrono::Duration::days(1))
    };
    assert!(matches!(store.execution_retry_many(&[retry]).await.unwrap()[0], Some(Inserted::Created(_))));
    // One finished now, outside every partition: the DEFAULT partition's, purged by row.
    queued(&*store, "a", 1).await;
    let late = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
    assert_eq!(store.execution_finish_many(&[finish(&late[0], ExecutionStatus::Failed)]).await.unwrap(), [true]);

    // The retention's cutoff past the first span: it goes, with the finished execution's
    // attempt and log line; the waiting one stays, and so does the one in the DEFAULT partition.
    // A round out of time for the jobs of a span drops nothing of it (its jobs are deleted
    // first); the next goes on from there.
    let short = store.history_upkeep(now(), window, Some(span.to), Duration::ZERO).await.unwrap();
    assert_eq!((short.jobs_purged, short.dropped.len()), (1, 0), "{short:?}");
    assert!(store.execution_get(&ids[0]).await.unwrap().is_some());
    let upkept = store.history_upkeep(now(), window, Some(span.to), LONG_BUDGET).await.unwrap();
    assert_eq!(upkept.dropped.len(), 3, "{upkept:?}");
    assert_eq!(upkept.jobs_purged, 0, "the finished execution's one-shot job went before it");
    assert!(store.job_get(&jobs[0]).await.unwrap().is_none());
    assert!(store.job_get(&retried_job.job_id).await.unwrap().is_some(), "a retried job stays");
    assert!(upkept.dropped.contains(&span.name), "{upkept:?}");
    // The purge's search for empty jobs stops at the oldest span still kept.
    let kept_from = store.history_kept_from().await.unwrap().expect("spans are kept");
    assert!(kept_from >= span.to, "{kept_from} after the dropped span's end {}", span.to);
    assert!(store.execution_get(&ids[0]).await.unwrap().is_none());
    assert!(store.attempt_list(&ids[0], &page).await.unwrap().is_empty());
    assert!(store.log_list(&ids[0], &page).await.unwrap().is_empty());
    assert_eq!(store.execution_get(&ids[1]).await.unwrap().unwrap().status, ExecutionStatus::Pending);
    assert!(store.execution_get(&late[0].execution_id).await.unwrap().is_some());
    // New spans keep being made ahead of now, before anything is dropped.
    assert!(!short.made.is_empty());
    // The vacuumer sees the queue's partition, each span, and the tables not partitioned.
    let churn: Vec<String> = store.table_churn().await.unwrap().tables.into_iter().map(|(t, _, _)| t).collect();
    for table in ["executions_live", "executions_done_default", "attempts_default", "jobs"] {
        assert!(churn.iter().any(|t| t == table), "{table} in {churn:?}");
    }
    assert!(!churn.iter().any(|t| t == &span.name), "dropped: {churn:?}");

    // The purge's row-by-row part reads only what no drop takes: the DEFAULT partition.
    let cutoff = now() + chrono::Duration::seconds(1);
    let by_row = store.execution_ids_finished(&FinishedScope::CreatedBefore(cutoff), 10).await.unwrap();
    assert_eq!(by_row, [late[0].execution_id.to_string()]);
    assert_eq!(store.execution_delete_finished(&by_row).await.unwrap(), 1);
    assert!(store.execution_get(&late[0].execution_id).await.unwrap().is_none());
    // The job left with no execution goes too; the waiting one's stays.
    assert_eq!(store.job_purge_finished(cutoff, 10).await.unwrap(), 1, "the late one's");
    assert!(store.job_get(&jobs[1]).await.unwrap().is_some(), "the waiting one's stays");
}

/// A partition attached over the time rows are being written for, while they are written
/// (as the scheduler's first round after a start does), refuses none of them: every write
/// lands, in the DEFAULT partition or the new one. PostgreSQL only (`store::partitions`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_made_while_rows_are_written_refuse_none() {
    let (store, _guard) = stores().await.into_iter().find(|(s, _)| s.backend() == Backend::Postgres).unwrap();
    endpoint(&*store, "a").await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut written = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    queued(&*store, "a", 5).await;
                    let worker = format!("w{w}");
                    let held = store.execution_claim(&claim(&worker, 5, Duration::from_secs(60))).await.unwrap();
                    let finishes: Vec<_> = held.iter().map(|e| finish(e, ExecutionStatus::Success)).collect();
                    let landed =
                        store.execution_finish_many(&finishes).await.unwrap_or_else(|e| panic!("results: {e:?}"));
                    assert!(landed.iter().all(|l| *l));
                    written += landed.len();
                }
                written
            })
        })
        .collect();
    let window = Duration::from_secs(10);
    for _ in 0..15 {
        // Every span gone, and the DEFAULT partitions emptied, so the next round attaches a
        // span over now while the writers write.
        store.history_upkeep(now(), window, Some(now() + chrono::Duration::hours(1)), LONG_BUDGET).await.unwrap();
        let ids = store
            .execution_ids_finished(&FinishedScope::CreatedBefore(now() + chrono::Duration::hours(1)), 100_000)
            .await
            .unwrap();
        store.execution_delete_finished(&ids).await.unwrap();
        store.history_upkeep(now(), window, None, LONG_BUDGET).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut written = 0;
    for writer in writers {
        written += writer.await.unwrap();
    }
    assert!(written > 0);
}

struct DropDatabase {
    admin: String,
    name: String,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                use sqlx::Connection;
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ =
                        sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await;
                }
            })
        })
        .join();
    }
}

async fn endpoint(store: &dyn Store, name: &str) {
    endpoint_with(store, name, None).await;
}

async fn endpoint_with(store: &dyn Store, name: &str, circuit_policy: Option<crate::flow::CircuitPolicy>) {
    let write = EndpointWrite {
        name: name.to_owned(),
        endpoint_type: EndpointType::Http,
        payload_spec: None,
        config: None,
        spec: json!({"url": "http://127.0.0.1:9/", "method": "POST"}),
        retry_policy: json!({"max_attempts": 3}),
        secret_refs: Vec::new(),
        plugin: None,
        renderer: None,
        max_concurrency: None,
        on_failure: None,
        rate_limit: None,
        circuit_policy,
        timeout_ms: None,
        plugin_version: None,
        classifier: None,
        classifier_config: None,
    };
    store.endpoint_insert(&write).await.unwrap();
}

fn job(endpoint: &str, trigger: Trigger, key: Option<&str>, at: DateTime<Utc>) -> JobWrite {
    JobWrite {
        job_id: JobId::new(),
        endpoint: endpoint.to_owned(),
        endpoint_version: 1,
        endpoint_type: EndpointType::Http,
        trigger_type: trigger,
        version: 1,
        previous_version_id: None,
        idempotency_key: key.map(str::to_owned),
        input: json!({}),
        run_at: None,
        cron_expression: None,
        cron_timezone: None,
        cron_starts_at: None,
        cron_ends_at: None,
        cron_next_run_at: None,
        created_at: at,
        trace_parent: Some(TRACE_PARENT.to_owned()),
        paused_at: None,
        overlap_policy: crate::domain::OverlapPolicy::Allow,
        catchup_policy: crate::domain::CatchupPolicy::All,
        catchup_window_sec: None,
        sla_ms: None,
        on_failure: None,
        schedule: None,
        schedule_spec: None,
    }
}

/// The trace context every test job and execution is written with.
/// Time enough for the partition upkeep to finish whatever it finds to do.
const LONG_BUDGET: Duration = Duration::from_secs(600);

const TRACE_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn execution(job: &JobWrite, status: ExecutionStatus, run_at: DateTime<Utc>) -> ExecutionWrite {
    ExecutionWrite {
        execution_id: ExecutionId::new(),
        job_id: job.job_id.clone(),
        endpoint: job.endpoint.clone(),
        endpoint_version: Some(1),
        endpoint_type: EndpointType::Http,
        idempotency_key: job.idempotency_key.clone(),
        status,
        input: json!({}),
        max_attempts: 3,
        run_at,
        created_at: job.created_at,
        trace_parent: job.trace_parent.clone(),
        retry_of: None,
        overlap_policy: None,
        sla_ms: None,
    }
}

/// `n` claimable (QUEUED, due) executions of `endpoint`; their ids.
async fn queued(store: &dyn Store, endpoint: &str, n: usize) -> Vec<ExecutionId> {
    let at = now() - chrono::Duration::seconds(1);
    let mut ids = Vec::new();
    for _ in 0..n {
        let j = job(endpoint, Trigger::Immediate, None, at);
        let e = execution(&j, ExecutionStatus::Queued, at);
        ids.push(e.execution_id.clone());
        store.job_insert(&j, Some(&e)).await.unwrap();
    }
    ids
}

fn claim(worker: &str, limit: i64, lease: Duration) -> ClaimParams {
    let at = now();
    ClaimParams {
        worker_id: worker.to_owned(),
        now: at,
        due_by: at,
        limit,
        lease,
        shares: EndpointShares { held: Vec::new(), ceiling: 1000 },
    }
}

fn finish(execution: &Execution, status: ExecutionStatus) -> AttemptFinish {
    AttemptFinish {
        execution_id: execution.execution_id.clone(),
        attempt_number: execution.attempt_count,
        execution_status: status,
        attempt_status: if status == ExecutionStatus::Success { AttemptStatus::Success } else { AttemptStatus::Failed },
        output: Some(json!({"status_code": 200})),
        error: None,
        started_at: now(),
        completed_at: now(),
        duration_ms: 1,
        retry_at: None,
        logs: vec![LogWrite { level: "INFO", message: "delivered".to_owned(), logged_at: now() }],
        endpoint: execution.endpoint.clone(),
        health: None,
    }
}

/// A delivery's outcome as the circuit breaker hears it: SUCCESS (`Up`), or RETRYING, due at
/// once (`Down`).
fn delivered(execution: &Execution, up: bool) -> AttemptFinish {
    use crate::flow::Health;
    let status = if up { ExecutionStatus::Success } else { ExecutionStatus::Retrying };
    AttemptFinish {
        retry_at: (!up).then(|| now() - chrono::Duration::seconds(1)),
        health: Some(if up { Health::Up } else { Health::Down("503 from the receiver".to_owned()) }),
        ..finish(execution, status)
    }
}

/// Run `check` against every backend, naming the backend when it fails.
macro_rules! on_every_backend {
    ($($check:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                for (store, _guard) in stores().await {
                    let backend = store.backend();
                    let outcome = tokio::spawn({
                        let store = store.clone();
                        async move { checks::$check(store).await }
                    })
                    .await;
                    if let Err(panic) = outcome {
                        panic!("{backend:?}: {panic}");
                    }
                }
            }
        )+
    };
}

on_every_backend!(
    claims_are_exclusive_under_concurrency,
    claims_take_only_due_work_and_lease_it,
    executions_promoted_ahead_are_claimed_ahead_to_start_at_their_time,
    a_free_slot_goes_to_the_endpoint_the_worker_holds_fewest_of,
    finishes_are_fenced_by_attempt_and_reclaim,
    leases_extend_and_never_shorten,
    leases_asked_for_together_are_extended_each_as_its_own,
    overlapping_lease_and_result_writes_never_deadlock,
    cron_ticks_are_recorded_once,
    inserts_are_idempotent,
    endpoints_are_read_many_at_once,
    pages_follow_creation_order,
    running_executions_are_read_with_the_rest,
    batch_results_write_winners_with_their_attempts_and_logs,
    an_open_circuit_is_passed_by_and_a_half_open_one_lets_one_probe_through,
    a_disabled_endpoint_is_passed_by_announced_once_and_enabled,
    writes_for_a_deleted_endpoint_or_job_find_it_gone,
);

/// PostgreSQL keeps no foreign keys from jobs to endpoints or from executions to jobs (0066):
/// the locks that stand in for them order a create and an endpoint delete that overlap, either
/// way round, so that no job outlives its endpoint and no create fails as anything but "gone".
/// Each side's other half is a transaction held open here, as a request in flight holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_and_an_endpoint_delete_that_overlap_leave_no_job_without_its_endpoint() {
    let (store, guard) = new_stores(None).await.swap_remove(0);
    store.migrate().await.unwrap();
    let guard = guard.downcast::<DropDatabase>().expect("the first store is PostgreSQL's");
    let url = format!("{}/{}", guard.admin.rsplit_once('/').unwrap().0, guard.name);
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let jobs_of = |name: &'static str| {
        let pool = pool.clone();
        async move {
            let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM jobs WHERE endpoint = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap();
            n
        }
    };
    // Until another backend is seen waiting on a lock (the write under test has reached it).
    let until_waiting = || async {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (waiting,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if waiting > 0 {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "the write never waited on the held row");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let at = now() - chrono::Duration::seconds(1);

    // A delete that went first: the creates wait on it, then find the endpoint gone.
    endpoint(&*store, "a").await;
    let mut delete = pool.begin().await.unwrap();
    sqlx::query("SELECT name FROM endpoints WHERE name = 'a' FOR UPDATE").execute(&mut *delete).await.unwrap();
    let (one, two) = (job("a", Trigger::Immediate, None, at), job("a", Trigger::Immediate, Some("k"), at));
    let creates = tokio::spawn({
        let store = store.clone();
        let (e1, e2) = (execution(&one, ExecutionStatus::Queued, at), execution(&two, ExecutionStatus::Queued, at));
        async move { store.job_insert_many(&[(&one, Some(&e1)), (&two, Some(&e2))]).await.unwrap() }
    });
    until_waiting().await;
    sqlx::query("DELETE FROM endpoints WHERE name = 'a'").execute(&mut *delete).await.unwrap();
    delete.commit().await.unwrap();
    let answered = creates.await.unwrap();
    assert!(
        answered.iter().all(|a| matches!(a, Err(StoreError::ForeignKeyViolation))),
        "each create found its endpoint gone: {:?}",
        answered.iter().map(|a| a.as_ref().map(|_| "written")).collect::<Vec<_>>()
    );
    assert_eq!(jobs_of("a").await, 0, "no job was written for the deleted endpoint");

    // A create that went first: the delete waits on it, then sees its job and refuses.
    endpoint(&*store, "b").await;
    let mut create = pool.begin().await.unwrap();
    sqlx::query("SELECT name FROM endpoints WHERE name = 'b' FOR KEY SHARE").execute(&mut *create).await.unwrap();
    let j = job("b", Trigger::Immediate, None, at);
    sqlx::query(
        "INSERT INTO jobs (job_id, endpoint, endpoint_type, trigger_type, created_at) VALUES ($1, 'b', 'HTTP', 'IMMEDIATE', now())",
    )
    .bind(j.job_id.as_str())
    .execute(&mut *create)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, status) VALUES ($1, $2, 'b', 'HTTP', 'QUEUED')",
    )
    .bind(ExecutionId::new().as_str())
    .bind(j.job_id.as_str())
    .execute(&mut *create)
    .await
    .unwrap();
    let deleted = tokio::spawn({
        let store = store.clone();
        async move { store.endpoint_delete("b").await.unwrap() }
    });
    until_waiting().await;
    create.commit().await.unwrap();
    match deleted.await.unwrap() {
        Deleted::InUse(jobs) => assert_eq!(jobs, [j.job_id.to_string()], "the refusal names the job written meanwhile"),
        other => panic!("the endpoint was deleted under a job created meanwhile: {other:?}"),
    }
    assert_eq!(jobs_of("b").await, 1);
    assert!(store.endpoint_get("b").await.unwrap().is_some());
}

mod checks {
    use super::*;

    pub async fn writes_for_a_deleted_endpoint_or_job_find_it_gone(store: Arc<dyn Store>) {
        let at = now() - chrono::Duration::seconds(1);
        endpoint(&*store, "kept").await;
        endpoint(&*store, "gone").await;
        assert!(matches!(store.endpoint_delete("gone").await.unwrap(), Deleted::Deleted));
        // A create whose endpoint went while the request was checked: gone, not a failed write.
        let orphan = job("gone", Trigger::Immediate, None, at);
        let outcome = store.job_insert(&orphan, Some(&execution(&orphan, ExecutionStatus::Queued, at))).await;
        assert!(matches!(outcome, Err(StoreError::ForeignKeyViolation)), "{:?}", outcome.map(|_| "written"));
        // In a batch, that job alone (keyed or not); the rest are written.
        let jobs = [
            job("kept", Trigger::Immediate, None, at),
            job("gone", Trigger::Immediate, None, at),
            job("gone", Trigger::Immediate, Some("k"), at),
            job("kept", Trigger::Immediate, Some("k"), at),
        ];
        let executions: Vec<ExecutionWrite> = jobs.iter().map(|j| execution(j, ExecutionStatus::Queued, at)).collect();
        let writes: Vec<_> = jobs.iter().zip(&executions).map(|(j, e)| (j, Some(e))).collect();
        let written = store.job_insert_many(&writes).await.unwrap();
        let outcomes: Vec<&str> = written
            .iter()
            .map(|w| match w {
                Ok(Inserted::Created(_)) => "created",
                Ok(Inserted::Existing(_)) => "existing",
                Err(StoreError::ForeignKeyViolation) => "gone",
                Err(_) => "failed",
            })
            .collect();
        assert_eq!(outcomes, ["created", "gone", "gone", "created"]);
        for (job, expected) in jobs.iter().zip([true, false, false, true]) {
            assert_eq!(store.job_get(job.job_id.as_str()).await.unwrap().is_some(), expected, "{}", job.endpoint);
        }
        // A new version for an endpoint that is gone: refused the same way, the old one kept.
        let mut cron = job("kept", Trigger::Cron, None, at);
        cron.cron_expression = Some("0 * * * *".to_owned());
        store.job_insert(&cron, None).await.unwrap();
        let next = JobWrite {
            version: 2,
            previous_version_id: Some(cron.job_id.clone()),
            ..job("gone", Trigger::Cron, None, at)
        };
        assert!(matches!(store.job_replace(cron.job_id.as_str(), &next).await, Err(StoreError::ForeignKeyViolation)));
        let old = store.job_get(cron.job_id.as_str()).await.unwrap().unwrap();
        assert_eq!(old.status, crate::domain::JobStatus::Active, "the refused replace retired nothing");
        // A retry of an execution whose job was deleted meanwhile is passed over.
        let failed = job("kept", Trigger::Immediate, None, at);
        let mut done = execution(&failed, ExecutionStatus::Failed, at);
        done.idempotency_key = None;
        store.job_insert(&failed, Some(&done)).await.unwrap();
        let retry = |of: &ExecutionWrite, job: &JobWrite| ExecutionWrite {
            execution_id: ExecutionId::new(),
            idempotency_key: Some(format!("{RETRY_KEY_PREFIX}{}", of.execution_id)),
            status: ExecutionStatus::Queued,
            retry_of: Some(of.execution_id.clone()),
            ..execution(job, ExecutionStatus::Queued, at)
        };
        let other = job("kept", Trigger::Immediate, None, at);
        let mut other_done = execution(&other, ExecutionStatus::Failed, at);
        other_done.idempotency_key = None;
        store.job_insert(&other, Some(&other_done)).await.unwrap();
        assert!(matches!(store.job_delete(failed.job_id.as_str()).await.unwrap(), Deleted::Deleted));
        let retried = store.execution_retry_many(&[retry(&done, &failed), retry(&other_done, &other)]).await.unwrap();
        assert!(retried[0].is_none(), "no retry for a deleted job");
        assert!(matches!(retried[1], Some(Inserted::Created(_))), "the other job's retry is written");
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        assert!(store.execution_list(failed.job_id.as_str(), None, &page).await.unwrap().is_empty());
    }

    pub async fn endpoints_are_read_many_at_once(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        endpoint(&*store, "b").await;
        endpoint(&*store, "c").await;
        let read = store.endpoint_get_many(&["b", "missing", "a", "b"]).await.unwrap();
        let mut names: Vec<&str> = read.iter().map(|e| e.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "b"], "each existing endpoint asked for, once; none that was not asked for");
        let one = store.endpoint_get("a").await.unwrap().unwrap();
        let many = read.iter().find(|e| e.name == "a").unwrap();
        assert_eq!((many.version, &many.spec, &many.retry_policy), (one.version, &one.spec, &one.retry_policy));
        assert!(store.endpoint_get_many(&[]).await.unwrap().is_empty());
        assert!(store.endpoint_get_many(&["missing"]).await.unwrap().is_empty());
    }

    pub async fn claims_are_exclusive_under_concurrency(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        endpoint(&*store, "b").await;
        let mut all: HashSet<ExecutionId> = queued(&*store, "a", 120).await.into_iter().collect();
        all.extend(queued(&*store, "b", 80).await);
        let claimers: Vec<_> = (0..4)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    loop {
                        let got =
                            store.execution_claim(&claim(&format!("w{w}"), 16, Duration::from_secs(60))).await.unwrap();
                        if got.is_empty() {
                            return mine;
                        }
                        mine.extend(got);
                    }
                })
            })
            .collect();
        let mut claimed = Vec::new();
        for c in claimers {
            claimed.extend(c.await.unwrap());
        }
        let ids: HashSet<ExecutionId> = claimed.iter().map(|e| e.execution_id.clone()).collect();
        assert_eq!(ids.len(), claimed.len(), "an execution was claimed twice");
        assert_eq!(ids, all, "every execution was claimed");
        for e in &claimed {
            assert_eq!((e.status, e.attempt_count), (ExecutionStatus::Running, 1), "{e:?}");
            assert!(e.worker_id.is_some() && e.lease_expires_at.is_some(), "{e:?}");
        }
    }

    /// A worker whose slots all hold one endpoint's backlog gives its next free slot to
    /// another endpoint's due work, however much older the backlog is.
    pub async fn a_free_slot_goes_to_the_endpoint_the_worker_holds_fewest_of(store: Arc<dyn Store>) {
        endpoint(&*store, "backlog").await;
        endpoint(&*store, "tick").await;
        queued(&*store, "backlog", 10).await;
        let tick = queued(&*store, "tick", 1).await;
        let shares = EndpointShares { held: vec![("backlog".to_owned(), 50)], ceiling: 100 };
        let one = ClaimParams { shares, ..claim("w", 1, Duration::from_secs(30)) };
        let claimed = store.execution_claim(&one).await.unwrap();
        assert_eq!(claimed.iter().map(|e| &e.execution_id).collect::<Vec<_>>(), [&tick[0]]);
        // Holding neither, a claim of two takes one of each (round-robin).
        queued(&*store, "tick", 1).await;
        let two = store.execution_claim(&claim("w", 2, Duration::from_secs(30))).await.unwrap();
        let mut endpoints: Vec<&str> = two.iter().map(|e| e.endpoint.as_str()).collect();
        endpoints.sort();
        assert_eq!(endpoints, ["backlog", "tick"]);
    }

    /// The promoter releases an execution with no overlap policy a little before its time; a
    /// claim takes it only when its `due_by` reaches that time, and records it as starting
    /// then (the worker starts it at it). A tick with an overlap policy waits for its time,
    /// when the policy is judged.
    pub async fn executions_promoted_ahead_are_claimed_ahead_to_start_at_their_time(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        let at = now();
        let soon = at + chrono::Duration::milliseconds(200);
        let j = job("a", Trigger::Delayed, None, at);
        let plain = execution(&j, ExecutionStatus::Pending, soon);
        store.job_insert(&j, Some(&plain)).await.unwrap();
        let k = job("a", Trigger::Cron, None, at);
        let mut held = execution(&k, ExecutionStatus::Pending, soon);
        held.overlap_policy = Some(crate::domain::OverlapPolicy::Skip);
        store.job_insert(&k, Some(&held)).await.unwrap();

        let promoted = store.execution_promote_due(at, chrono::Duration::milliseconds(250)).await.unwrap();
        assert_eq!(promoted, [soon], "the plain one only, and its time");
        let queued = store.execution_get(&plain.execution_id).await.unwrap().unwrap();
        assert_eq!((queued.status, queued.run_at), (ExecutionStatus::Queued, soon));
        assert_eq!(store.execution_get(&held.execution_id).await.unwrap().unwrap().status, ExecutionStatus::Pending);
        let early = at + chrono::Duration::milliseconds(199);
        let not_yet = ClaimParams { now: early, due_by: early, ..claim("w", 10, Duration::from_secs(30)) };
        assert!(store.execution_claim(&not_yet).await.unwrap().is_empty(), "a claim takes nothing due after due_by");
        // A worker claims it ahead, to start it at its time: so the claim records its start.
        let ahead = ClaimParams { now: early, due_by: early + READY_AHEAD, ..claim("w", 10, Duration::from_secs(30)) };
        let claimed = store.execution_claim(&ahead).await.unwrap();
        assert_eq!(claimed.iter().map(|e| &e.execution_id).collect::<Vec<_>>(), [&plain.execution_id]);
        assert_eq!((claimed[0].started_at, claimed[0].claimed_at), (Some(soon), Some(soon)), "it starts at its time");
        // At its time the overlap policy is judged, and the tick released.
        assert_eq!(store.execution_promote_due(soon, chrono::Duration::zero()).await.unwrap(), [soon]);
    }

    pub async fn claims_take_only_due_work_and_lease_it(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        let due = queued(&*store, "a", 3).await;
        let later = now() + chrono::Duration::seconds(3600);
        let j = job("a", Trigger::Delayed, None, now());
        store.job_insert(&j, Some(&execution(&j, ExecutionStatus::Pending, later))).await.unwrap();
        let before = now();
        let got = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
        let got_ids: HashSet<_> = got.iter().map(|e| e.execution_id.clone()).collect();
        assert_eq!(got_ids, due.into_iter().collect(), "only the QUEUED, due executions");
        for e in &got {
            let lease = e.lease_expires_at.unwrap();
            assert!(lease > before + chrono::Duration::seconds(50), "leased for the claim's 60 s: {lease}");
            assert_eq!(e.worker_id.as_deref(), Some("w"));
            assert_eq!(e.trace_parent.as_deref(), Some(TRACE_PARENT), "the job's trace context reaches the worker");
        }
        assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
        // A limit is a limit.
        queued(&*store, "a", 5).await;
        assert_eq!(store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap().len(), 2);
    }

    pub async fn finishes_are_fenced_by_attempt_and_reclaim(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        queued(&*store, "a", 1).await;
        // A lease of 1 ms: expired by the time the reclaimer looks.
        let first = store.execution_claim(&claim("lost", 1, Duration::from_millis(1))).await.unwrap().remove(0);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(store.execution_reclaim_expired(now()).await.unwrap(), 1);
        let reclaimed = store.execution_get(&first.execution_id).await.unwrap().unwrap();
        assert_eq!(reclaimed.status, ExecutionStatus::Retrying);
        let attempts = store
            .attempt_list(&first.execution_id, &PageRequest { after: None, limit: 10, ..Default::default() })
            .await
            .unwrap();
        assert_eq!(attempts.len(), 1);
        assert_eq!(attempts[0].error.as_ref().unwrap()["type"], "WORKER_LOST");
        // The lost worker's late result is fenced out.
        assert_eq!(store.execution_finish_many(&[finish(&first, ExecutionStatus::Success)]).await.unwrap(), [false]);
        // The next claim is attempt 2; its result is written once, and never again.
        let second = store.execution_claim(&claim("w2", 1, Duration::from_secs(60))).await.unwrap().remove(0);
        assert_eq!(second.attempt_count, 2);
        assert_eq!(store.execution_finish_many(&[finish(&second, ExecutionStatus::Success)]).await.unwrap(), [true]);
        assert_eq!(store.execution_finish_many(&[finish(&second, ExecutionStatus::Failed)]).await.unwrap(), [false]);
        let done = store.execution_get(&first.execution_id).await.unwrap().unwrap();
        assert_eq!((done.status, done.attempt_count), (ExecutionStatus::Success, 2));
        assert_eq!(store.execution_reclaim_expired(now()).await.unwrap(), 0, "a finished execution is not reclaimed");
    }

    pub async fn leases_extend_and_never_shorten(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        queued(&*store, "a", 1).await;
        let held = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap().remove(0);
        let lease = held.lease_expires_at.unwrap();
        let shorter = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 1, for_ms: 1_000 };
        store.execution_lease_extend(&[shorter]).await.unwrap();
        let after = store.execution_get(&held.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
        assert!(after >= lease, "a lease was shortened: {lease} -> {after}");
        let longer = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 1, for_ms: 600_000 };
        assert_eq!(store.execution_lease_extend(&[longer]).await.unwrap(), 1);
        let after = store.execution_get(&held.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
        assert!(after > lease + chrono::Duration::seconds(300), "{lease} -> {after}");
        let stale = LeaseExtend { execution_id: held.execution_id.clone(), attempt: 2, for_ms: 600_000 };
        assert_eq!(store.execution_lease_extend(&[stale]).await.unwrap(), 0, "another attempt's lease is not extended");
    }

    /// The worker's `Leases::ensure`, asked by many attempts at once, writes them together and
    /// still answers each for itself: one held under a stale attempt number is refused while
    /// the others are extended.
    pub async fn leases_asked_for_together_are_extended_each_as_its_own(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        queued(&*store, "a", 6).await;
        let claimed = store.execution_claim(&claim("w", 6, Duration::from_secs(30))).await.unwrap();
        assert_eq!(claimed.len(), 6);
        let leases = crate::worker::Leases::new(store.clone(), Duration::from_secs(30));
        let asks: Vec<_> = claimed
            .iter()
            .enumerate()
            .map(|(i, execution)| {
                let leases = leases.clone();
                let id = execution.execution_id.to_string();
                // The last one is asked for under an attempt this worker does not hold.
                let attempt = if i == 5 { 2 } else { 1 };
                tokio::spawn(async move { leases.ensure(&id, attempt, Duration::from_secs(600)).await.unwrap() })
            })
            .collect();
        let mut answers = Vec::new();
        for ask in asks {
            answers.push(ask.await.unwrap());
        }
        assert_eq!(answers, [true, true, true, true, true, false]);
        for (i, execution) in claimed.iter().enumerate() {
            let lease = store.execution_get(&execution.execution_id).await.unwrap().unwrap().lease_expires_at.unwrap();
            let extended = lease > now() + chrono::Duration::seconds(300);
            assert_eq!(extended, i < 5, "execution {i}: lease until {lease}");
        }
    }

    /// A worker renews everything it holds while extensions and result batches for some of the
    /// same executions are written, each listing them in its own order. Every statement must
    /// succeed: a deadlock aborts one, and an aborted extension failed its attempt.
    pub async fn overlapping_lease_and_result_writes_never_deadlock(store: Arc<dyn Store>) {
        use rand::seq::SliceRandom;
        endpoint(&*store, "a").await;
        queued(&*store, "a", 60).await;
        let claimed = store.execution_claim(&claim("w", 60, Duration::from_secs(30))).await.unwrap();
        assert_eq!(claimed.len(), 60);
        let leases: Vec<LeaseExtend> = claimed
            .iter()
            .map(|e| LeaseExtend { execution_id: e.execution_id.clone(), attempt: e.attempt_count, for_ms: 30_000 })
            .collect();
        let writers: Vec<_> = (0..4)
            .map(|writer| {
                let (store, mut leases, mut claimed) = (store.clone(), leases.clone(), claimed.clone());
                tokio::spawn(async move {
                    for round in 0..15 {
                        leases.shuffle(&mut rand::thread_rng());
                        store.execution_lease_extend(&leases).await.unwrap_or_else(|e| panic!("extension: {e:?}"));
                        // One writer finishes half the executions midway, in its own order.
                        if writer == 0 && round == 7 {
                            claimed.shuffle(&mut rand::thread_rng());
                            let finishes: Vec<_> =
                                claimed[..30].iter().map(|e| finish(e, ExecutionStatus::Success)).collect();
                            let written = store
                                .execution_finish_many(&finishes)
                                .await
                                .unwrap_or_else(|e| panic!("results: {e:?}"));
                            assert_eq!(written, vec![true; 30]);
                        }
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        let running = store.execution_lease_extend(&leases).await.unwrap();
        assert_eq!(running, 30, "the executions not finished are still held");
    }

    pub async fn cron_ticks_are_recorded_once(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        let tick = chrono::DateTime::parse_from_rfc3339("2026-01-01T09:00:00Z").unwrap().with_timezone(&Utc);
        let mut j = job("a", Trigger::Cron, None, tick - chrono::Duration::hours(1));
        j.cron_expression = Some("0 0 9 * * *".to_owned());
        j.cron_timezone = Some("UTC".to_owned());
        j.cron_starts_at = Some(j.created_at);
        j.cron_next_run_at = Some(tick);
        store.job_insert(&j, None).await.unwrap();
        let advance = |_: usize| {
            let mut e = execution(&j, ExecutionStatus::Pending, tick);
            e.idempotency_key = Some(format!("tick:{}", tick.timestamp()));
            CronAdvance {
                job_id: j.job_id.clone(),
                tick,
                last: tick,
                next: Some(tick + chrono::Duration::days(1)),
                execution: Some(e),
            }
        };
        // Two schedulers record the same tick at once: one wins.
        let racers: Vec<_> = (0..2)
            .map(|i| {
                let store = store.clone();
                let a = advance(i);
                tokio::spawn(async move { store.cron_advance_many(&[a]).await.unwrap() })
            })
            .collect();
        let mut won = 0;
        for r in racers {
            won += r.await.unwrap().iter().filter(|w| **w).count();
        }
        assert_eq!(won, 1, "the tick was recorded {won} times");
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        assert_eq!(store.execution_list(&j.job_id, None, &page).await.unwrap().len(), 1);
        let job = store.job_get(&j.job_id).await.unwrap().unwrap();
        assert_eq!(job.cron_next_run_at, Some(tick + chrono::Duration::days(1)));
        assert_eq!(job.cron_last_tick_at, Some(tick));
        // A stale advance (its tick is no longer the job's next) changes nothing.
        assert_eq!(store.cron_advance_many(&[advance(3)]).await.unwrap(), [false]);
    }

    pub async fn inserts_are_idempotent(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        let at = now();
        let first = job("a", Trigger::Immediate, Some("once"), at);
        let created = store.job_insert(&first, Some(&execution(&first, ExecutionStatus::Queued, at))).await.unwrap();
        let Inserted::Created(created) = created else { panic!("the first insert creates") };
        let again = job("a", Trigger::Immediate, Some("once"), at);
        match store.job_insert(&again, Some(&execution(&again, ExecutionStatus::Queued, at))).await.unwrap() {
            Inserted::Existing(existing) => assert_eq!(existing.job_id, created.job_id),
            Inserted::Created(_) => panic!("a repeat with the same idempotency key created a second job"),
        }
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        assert_eq!(store.execution_list(&created.job_id, None, &page).await.unwrap().len(), 1);
        assert!(matches!(store.config_insert("c", &json!({"a": 1})).await.unwrap(), Inserted::Created(_)));
        match store.config_insert("c", &json!({"a": 2})).await.unwrap() {
            Inserted::Existing(c) => assert_eq!(c.values, json!({"a": 1}), "the existing row is returned unchanged"),
            Inserted::Created(_) => panic!("a second config under one name"),
        }
    }

    pub async fn pages_follow_creation_order(store: Arc<dyn Store>) {
        for i in 0..25 {
            store.config_insert(&format!("cfg-{i:02}"), &json!({})).await.unwrap();
        }
        let mut seen: Vec<(DateTime<Utc>, String)> = Vec::new();
        let mut after = None;
        loop {
            let page = store
                .config_list(&PageRequest { after: after.clone(), limit: 10, ..Default::default() })
                .await
                .unwrap();
            if page.is_empty() {
                break;
            }
            let last = page.last().unwrap();
            after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
            seen.extend(page.into_iter().map(|c| (c.created_at, c.name)));
        }
        assert_eq!(seen.len(), 25, "every row once");
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "pages in (created_at, key) order: {seen:?}");

        // Newest first: the same rows, the walk reversed.
        let mut backwards: Vec<(DateTime<Utc>, String)> = Vec::new();
        let mut after = None;
        loop {
            let page = PageRequest { after: after.clone(), limit: 10, newest_first: true };
            let page = store.config_list(&page).await.unwrap();
            let Some(last) = page.last() else { break };
            after = Some(PageKey { created_at: last.created_at, key: last.name.clone() });
            backwards.extend(page.into_iter().map(|c| (c.created_at, c.name)));
        }
        seen.reverse();
        assert_eq!(backwards, seen, "newest first walks the same rows backwards");
    }

    /// Every read of a job's executions, or of all of them, finds the RUNNING ones in their
    /// place, although PostgreSQL's list indexes leave them out (`settled_or_running`).
    pub async fn running_executions_are_read_with_the_rest(store: Arc<dyn Store>) {
        endpoint(&*store, "e").await;
        let at = now() - chrono::Duration::seconds(10);
        let j = job("e", Trigger::Immediate, None, at);
        // Created in this order: `done` (due first), `waiting` (due in an hour), `running`.
        let done = execution(&j, ExecutionStatus::Queued, at);
        store.job_insert(&j, Some(&done)).await.unwrap();
        // Written as retries are (keyed in the job), the way a job gets a second execution.
        let waiting = ExecutionWrite {
            idempotency_key: Some("retry:waiting".to_owned()),
            created_at: at + chrono::Duration::seconds(1),
            run_at: now() + chrono::Duration::hours(1),
            ..execution(&j, ExecutionStatus::Queued, at)
        };
        let running = ExecutionWrite {
            idempotency_key: Some("retry:running".to_owned()),
            created_at: at + chrono::Duration::seconds(2),
            run_at: at + chrono::Duration::seconds(1),
            ..execution(&j, ExecutionStatus::Queued, at)
        };
        store.execution_retry_many(&[waiting.clone(), running.clone()]).await.unwrap();
        let first = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
        assert_eq!(first[0].execution_id, done.execution_id);
        assert_eq!(store.execution_finish_many(&[finish(&first[0], ExecutionStatus::Success)]).await.unwrap(), [true]);
        let second = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].execution_id, running.execution_id);

        let ids = |page: Vec<Execution>| page.into_iter().map(|e| e.execution_id).collect::<Vec<_>>();
        let created_order = vec![done.execution_id.clone(), waiting.execution_id.clone(), running.execution_id.clone()];
        let all = PageRequest { limit: 10, ..Default::default() };
        assert_eq!(
            ids(store.execution_list(&j.job_id, None, &all).await.unwrap()),
            created_order,
            "a job's executions"
        );
        let by_endpoint = ExecutionFilter { endpoint: Some("e".to_owned()), ..Default::default() };
        assert_eq!(ids(store.execution_search(&by_endpoint, &all).await.unwrap()), created_order, "all executions");
        let newest = PageRequest { newest_first: true, ..all.clone() };
        let mut reversed = created_order.clone();
        reversed.reverse();
        assert_eq!(ids(store.execution_list(&j.job_id, None, &newest).await.unwrap()), reversed, "newest first");
        // One at a time, each page after the last.
        let mut walked = Vec::new();
        let mut after = None;
        while let Some(last) = store
            .execution_list(&j.job_id, None, &PageRequest { after: after.clone(), limit: 1, newest_first: false })
            .await
            .unwrap()
            .pop()
        {
            after = Some(PageKey { created_at: last.created_at, key: last.execution_id.to_string() });
            walked.push(last.execution_id);
        }
        assert_eq!(walked, created_order, "pages of one");
        let only_running = ids(store.execution_list(&j.job_id, Some(ExecutionStatus::Running), &all).await.unwrap());
        assert_eq!(only_running, std::slice::from_ref(&running.execution_id));
        assert_eq!(store.execution_last(&j.job_id).await.unwrap().unwrap().execution_id, running.execution_id);
        assert_eq!(store.execution_first(&j.job_id).await.unwrap().unwrap().execution_id, done.execution_id);
        let activity = store.execution_activity(at - chrono::Duration::seconds(1), 10).await.unwrap();
        let statuses: Vec<ExecutionStatus> = activity.iter().map(|a| a.status).collect();
        assert_eq!(
            statuses,
            [ExecutionStatus::Running, ExecutionStatus::Queued, ExecutionStatus::Success],
            "newest first"
        );
        let mut counts = store.execution_counts().await.unwrap();
        counts.sort_by_key(|(status, _)| status.as_str());
        assert_eq!(
            counts,
            [(ExecutionStatus::Queued, 1), (ExecutionStatus::Running, 1)],
            "the overview counts the unfinished, and nothing finished"
        );
        let stats = store.job_stats(&j.job_id, at).await.unwrap();
        assert_eq!((stats.running, stats.queued, stats.succeeded), (1, 1, 1));
        match store.job_delete(&j.job_id).await.unwrap() {
            Deleted::InUse(unfinished) => {
                let unfinished: HashSet<String> = unfinished.into_iter().collect();
                let expected: HashSet<String> =
                    [waiting.execution_id.to_string(), running.execution_id.to_string()].into_iter().collect();
                assert_eq!(unfinished, expected, "the unfinished executions hold the job");
            }
            other => panic!("a job with a RUNNING execution was deleted: {other:?}"),
        }
    }

    pub async fn batch_results_write_winners_with_their_attempts_and_logs(store: Arc<dyn Store>) {
        endpoint(&*store, "a").await;
        queued(&*store, "a", 3).await;
        let held = store.execution_claim(&claim("w", 3, Duration::from_secs(60))).await.unwrap();
        assert_eq!(held.len(), 3);
        // The middle one is already finished (as by a worker whose lease was taken over):
        // the batch's write of it is fenced out, and its batch-mates are written.
        assert_eq!(store.execution_finish_many(&[finish(&held[1], ExecutionStatus::Failed)]).await.unwrap(), [true]);
        let mut retrying = finish(&held[2], ExecutionStatus::Retrying);
        retrying.retry_at = Some(now() + chrono::Duration::seconds(30));
        let written = store
            .execution_finish_many(&[
                finish(&held[0], ExecutionStatus::Success),
                finish(&held[1], ExecutionStatus::Success),
                retrying,
            ])
            .await
            .unwrap();
        assert_eq!(written, [true, false, true]);
        let page = PageRequest { after: None, limit: 10, ..Default::default() };
        for (e, status, attempts) in [
            (&held[0], ExecutionStatus::Success, 1),
            (&held[1], ExecutionStatus::Failed, 1),
            (&held[2], ExecutionStatus::Retrying, 1),
        ] {
            let now_is = store.execution_get(&e.execution_id).await.unwrap().unwrap();
            assert_eq!(now_is.status, status, "{}", e.execution_id);
            assert_eq!(store.attempt_list(&e.execution_id, &page).await.unwrap().len(), attempts);
            assert_eq!(
                store.log_list(&e.execution_id, &page).await.unwrap().len(),
                1,
                "one log line per written attempt"
            );
        }
        let retried = store.execution_get(&held[2].execution_id).await.unwrap().unwrap();
        assert!(retried.run_at > now() + chrono::Duration::seconds(20), "the retry waits for its time");
        assert!(store.execution_claim(&claim("w", 3, Duration::from_secs(60))).await.unwrap().is_empty());
    }

    /// Claims until one returns something (a circuit's cool-down of a millisecond passing),
    /// for at most five seconds.
    async fn claim_when_due(store: &dyn Store) -> Vec<Execution> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let got = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
            if !got.is_empty() || std::time::Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn an_open_circuit_is_passed_by_and_a_half_open_one_lets_one_probe_through(store: Arc<dyn Store>) {
        use crate::flow::{circuit::Phase, CircuitPolicy};
        let policy = |cooldown_ms| CircuitPolicy {
            failure_threshold: 2,
            cooldown_ms,
            max_cooldown_ms: cooldown_ms,
            auto_disable_after_sec: None,
        };
        // Two failures open `shut` for ten minutes: its executions wait, whatever is due.
        endpoint_with(&*store, "shut", Some(policy(600_000))).await;
        queued(&*store, "shut", 4).await;
        let first = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
        assert_eq!(first.len(), 2);
        let finishes: Vec<_> = first.iter().map(|e| delivered(e, false)).collect();
        assert_eq!(store.execution_finish_many(&finishes).await.unwrap(), vec![true, true]);
        let shut = store.endpoint_get("shut").await.unwrap().unwrap();
        assert_eq!(shut.circuit().phase(now()), Phase::Open, "{shut:?}");
        assert_eq!(shut.circuit_failures, 2);
        assert_eq!(shut.circuit_last_error.as_deref(), Some("503 from the receiver"));
        assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
        assert_eq!(store.endpoint_circuits_not_closed().await.unwrap().len(), 1);

        // `probe` cools down in a millisecond: then one execution at a time goes out.
        endpoint_with(&*store, "probe", Some(policy(1))).await;
        queued(&*store, "probe", 3).await;
        let opening = store.execution_claim(&claim("w", 2, Duration::from_secs(60))).await.unwrap();
        assert_eq!(opening.len(), 2);
        let finishes: Vec<_> = opening.iter().map(|e| delivered(e, false)).collect();
        store.execution_finish_many(&finishes).await.unwrap();
        let probe = claim_when_due(&*store).await;
        assert_eq!(probe.len(), 1, "half-open: one probe, however much is due");
        assert_eq!(probe[0].endpoint, "probe", "`shut` is still open");
        assert!(
            store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty(),
            "no second probe while the first runs"
        );
        // A failed probe opens it again; a good one closes it, and the rest flows.
        store.execution_finish_many(&[delivered(&probe[0], false)]).await.unwrap();
        assert_eq!(store.endpoint_get("probe").await.unwrap().unwrap().circuit_failures, 3);
        let probe = claim_when_due(&*store).await;
        assert_eq!(probe.len(), 1);
        store.execution_finish_many(&[delivered(&probe[0], true)]).await.unwrap();
        let closed = store.endpoint_get("probe").await.unwrap().unwrap();
        assert_eq!((closed.circuit().phase(now()), closed.circuit_failures), (Phase::Closed, 0), "{closed:?}");
        let rest = store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap();
        assert_eq!(rest.len(), 2, "the other two, at once");
        assert!(rest.iter().all(|e| e.endpoint == "probe"));
    }

    pub async fn a_disabled_endpoint_is_passed_by_announced_once_and_enabled(store: Arc<dyn Store>) {
        use crate::flow::CircuitPolicy;
        // Failing for "0 s" disables it at the first failure.
        let policy = CircuitPolicy { auto_disable_after_sec: Some(0), ..CircuitPolicy::default() };
        endpoint_with(&*store, "doomed", Some(policy)).await;
        queued(&*store, "doomed", 2).await;
        let got = store.execution_claim(&claim("w", 1, Duration::from_secs(60))).await.unwrap();
        store.execution_finish_many(&[delivered(&got[0], false)]).await.unwrap();
        let doomed = store.endpoint_get("doomed").await.unwrap().unwrap();
        let disabled_at = doomed.disabled_at.expect("disabled");
        assert!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().is_empty());
        let unannounced = store.endpoints_disabled_unannounced(10).await.unwrap();
        assert_eq!(unannounced.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["doomed"]);
        store.endpoint_disabled_announced("doomed", disabled_at).await.unwrap();
        assert!(store.endpoints_disabled_unannounced(10).await.unwrap().is_empty(), "announced once");
        let enabled = store.endpoint_enable("doomed").await.unwrap().unwrap();
        assert_eq!((enabled.disabled_at, enabled.circuit_failures), (None, 0));
        assert_eq!(store.execution_claim(&claim("w", 10, Duration::from_secs(60))).await.unwrap().len(), 2);
        assert!(store.endpoint_enable("nope").await.unwrap().is_none());
    }
}
