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
use crate::ids::ExecutionId;

/// A migrated store of each backend, each on a database of its own; the guards keep them.
async fn stores() -> Vec<(Arc<dyn Store>, Box<dyn std::any::Any>)> {
    let stores = new_stores(None).await;
    for (store, _) in &stores {
        store.migrate().await.unwrap();
    }
    stores
}

/// A store of each backend on a database of its own, empty or with the migrations before
/// `before` applied (PostgreSQL's, SQLite's; without the store's own migrate, which the caller
/// runs when it wants): rows written through the latter are as a database of that time holds
/// them.
async fn new_stores(before: Option<(i64, i64)>) -> Vec<(Arc<dyn Store>, Box<dyn std::any::Any>)> {
    use sqlx::migrate::Migrator;
    let until = |mut migrator: Migrator, version: i64| {
        migrator.migrations = migrator.migrations.iter().filter(|m| m.version < version).cloned().collect();
        migrator
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let sqlite: Arc<dyn Store> = Arc::new(sqlite::SqliteStore::connect(&path, 4).await.unwrap());
    if let Some((_, version)) = before {
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
    if let Some((version, _)) = before {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        until(sqlx::migrate!("../migrations/postgres"), version).run(&pool).await.unwrap();
        pool.close().await;
    }
    let postgres: Arc<dyn Store> = Arc::new(postgres::PgStore::connect(&url, 8).await.unwrap());
    vec![(postgres, Box::new(DropDatabase { admin, name })), (sqlite, Box::new(dir))]
}

/// Columns that migrations after an old database's last add and that today's store reads
/// wherever it writes (a claim reads `endpoints.paused_at`), with their PostgreSQL and SQLite
/// types. A test that writes rows with today's store into a database left at an earlier
/// migration adds them by hand first ([`later_columns`]) and drops them before the store
/// migrates the database; a migration that adds such a column adds it here too.
const LATER_COLUMNS: &[(&str, &str, &str, &str)] = &[
    ("endpoints", "paused_at", "TIMESTAMPTZ", "TEXT"),
    ("executions", "trigger_reason", "TEXT", "TEXT"),
    ("jobs", "cron_jitter_ms", "INTEGER", "INTEGER"),
    ("jobs", "expires_at", "TIMESTAMPTZ", "TEXT"),
    ("executions", "expires_at", "TIMESTAMPTZ", "TEXT"),
    ("executions", "abort_requested_at", "TIMESTAMPTZ", "TEXT"),
    ("jobs", "on_success", "TEXT", "TEXT"),
    ("executions", "on_success", "TEXT", "TEXT"),
    ("endpoints", "concurrency", "JSONB", "TEXT"),
    ("executions", "concurrency_key", "TEXT", "TEXT"),
    ("executions", "concurrency_limit", "INT", "INT"),
    ("executions", "key_waiting", "BOOLEAN NOT NULL DEFAULT FALSE", "BOOLEAN NOT NULL DEFAULT FALSE"),
];

/// Add (or drop) [`LATER_COLUMNS`] in the database a [`new_stores`] guard keeps.
async fn later_columns(guard: &dyn std::any::Any, add: bool) {
    use sqlx::Connection;
    for (table, column, pg_type, sqlite_type) in LATER_COLUMNS {
        if let Some(db) = guard.downcast_ref::<DropDatabase>() {
            let url = format!("{}/{}", db.admin.rsplit_once('/').unwrap().0, db.name);
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            let sql = if add {
                format!("ALTER TABLE {table} ADD COLUMN {column} {pg_type}")
            } else {
                format!("ALTER TABLE {table} DROP COLUMN {column}")
            };
            sqlx::query(&sql).execute(&mut conn).await.unwrap();
        } else if let Some(dir) = guard.downcast_ref::<tempfile::TempDir>() {
            let url = format!("sqlite:{}", dir.path().join("c.db").display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            let sql = if add {
                format!("ALTER TABLE {table} ADD COLUMN {column} {sqlite_type}")
            } else {
                format!("ALTER TABLE {table} DROP COLUMN {column}")
            };
            sqlx::query(&sql).execute(&mut conn).await.unwrap();
        }
    }
}

mod access;
mod claims;
mod flow;
mod foreign_keys;
mod keys;
mod partitions;
mod results;
mod writes;

async fn endpoint(store: &dyn Store, name: &str) {
    endpoint_with(store, name, None).await;
}

async fn endpoint_with(store: &dyn Store, name: &str, circuit_policy: Option<crate::flow::CircuitPolicy>) {
    store.endpoint_insert(&endpoint_write(name, circuit_policy)).await.unwrap();
}

fn endpoint_write(name: &str, circuit_policy: Option<crate::flow::CircuitPolicy>) -> EndpointWrite {
    EndpointWrite {
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
        concurrency: None,
    }
}

fn job(endpoint: &str, trigger: Trigger, key: Option<&str>, at: DateTime<Utc>) -> JobWrite {
    JobWrite {
        idempotency_key: key.map(str::to_owned),
        trace_parent: Some(TRACE_PARENT.to_owned()),
        ..JobWrite::new(endpoint, 1, EndpointType::Http, trigger, at)
    }
}

/// The trace context every test job and execution is written with.
/// Time enough for the partition upkeep to finish whatever it finds to do.
const LONG_BUDGET: Duration = Duration::from_secs(600);

const TRACE_PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn execution(job: &JobWrite, status: ExecutionStatus, run_at: DateTime<Utc>) -> ExecutionWrite {
    ExecutionWrite::first_of(job, status, run_at, 3)
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
        attempt_status: match status {
            ExecutionStatus::Success => AttemptStatus::Success,
            ExecutionStatus::Cancelled => AttemptStatus::Cancelled,
            _ => AttemptStatus::Failed,
        },
        output: Some(json!({"status_code": 200})),
        error: None,
        started_at: now(),
        completed_at: now(),
        duration_ms: 1,
        retry_at: None,
        logs: vec![LogWrite { level: "INFO", message: "delivered".to_owned(), logged_at: now() }],
        endpoint: execution.endpoint.clone(),
        health: None,
        concurrency_key: execution.concurrency_key.clone(),
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
    aborts_are_found_by_their_worker_and_a_lost_worker_s_cancelled,
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
    issued_keys_are_kept_listed_and_revoked,
    each_tenant_reads_its_own_resources_and_no_other_s,
    audit_records_are_listed_by_tenant_and_purged_by_age,
    a_key_admits_up_to_its_bound_in_the_order_its_executions_fire,
    concurrent_admissions_of_one_key_never_pass_its_bound,
);

/// Drops a test's PostgreSQL database when the test is done with it.
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

/// Every check, by name, for [`on_every_backend`].
mod checks {
    pub use super::access::*;
    pub use super::claims::*;
    pub use super::flow::*;
    pub use super::keys::*;
    pub use super::results::*;
    pub use super::writes::*;
}
