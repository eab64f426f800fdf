//! PostgreSQL (and CockroachDB) backend.
//!
//! Lock order: every statement that writes several executions at once (a worker's lease
//! renewals and extensions, a batch of results) first locks its rows in execution id order,
//! in a `FOR UPDATE` CTE, then writes them. An UPDATE joined to an array locks rows in
//! whatever order its plan visits them, and two such statements over overlapping rows (the
//! renewal of everything a worker holds, and a batch of those same executions' results)
//! deadlocked under load; PostgreSQL then aborted one after a second, and a lease extension
//! aborted that way failed its attempt as `STORE_UNAVAILABLE`. The reclaimer passes over
//! locked rows instead of waiting (`lock_skip_locked`, a phrase of `sql::DIALECT`).
//!
//! Plans: sqlx prepares each statement once per connection, and after five executions
//! PostgreSQL may keep one generic plan for it, made for the table as it was then. A new
//! installation's tables start empty, and without a recent ANALYZE (autovacuum off, or its first
//! minute) that plan is made for a table of a few pages and kept while the table grows:
//! `auto_explain` caught the claim reading all 20,525 rows of `executions` for 100 (41 ms of a
//! 45 ms claim) and a cron advance reading all 100,000 jobs for 100 (37 ms). The statements
//! that join a set of rows to a large table either have one plan that is right at any size
//! (the claim, planned once on purpose: planning it costs as much as running it) or are
//! planned at each execution with their arrays in hand (`persistent(false)`: a fraction of a
//! millisecond each), where they are not run so often that planning costs more than a poor
//! plan. Planning every statement so (`plan_cache_mode = force_custom_plan` for the pool) was
//! measured and dropped: drain fell by a quarter.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgArguments, PgListener, PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::sql::statements::postgres as sql;
use maintenance::{warn_if_autovacuum_off, AUTOVACUUM, MAINTENANCE_POOL_SIZE};
use migrations::{accept_rewritten_migrations, MigrationLock};
use statements::*;

mod claim;
mod maintenance;
mod migrations;
mod statements;
use super::claims::{finish_many, Claims};
use super::sql::{Db, SqlBackend, Tx};
use super::{Backend, Execution, FinishedAttempts, Signal, Store, StoreResult, WorkerCommits};
use crate::ids::{AttemptId, LogId};

pub struct PgStore {
    pool: PgPool,
    /// The vacuums' and the partition upkeep's own connections, opened when first used (so
    /// never in a process without a scheduler), at most [`MAINTENANCE_POOL_SIZE`]: a paced
    /// vacuum of a history table holds its connection for minutes, and in the pool the
    /// worker's claims and result writes wait for, it and the upkeep left them short (the
    /// soak's cron ticks up to 2.2 s late, its rate at 55-76%).
    maintenance: PgPool,
    /// CockroachDB has neither advisory locks nor LISTEN/NOTIFY; learned once at connect.
    cockroach: bool,
    /// How the worker's claims and attempt results are committed.
    worker_commits: WorkerCommits,
    /// Where LISTEN connects.
    listen: super::ListenVia,
    /// Whether the queue is apart from its history, and history in time partitions
    /// (`store::partitions`): PostgreSQL from its first migration on; never CockroachDB.
    partitioned: std::sync::atomic::AtomicBool,
}

impl PgStore {
    pub async fn connect(url: &str, pool_size: u32) -> StoreResult<Self> {
        // Each process names its connections (`taskexec/PID` in pg_stat_activity), unless the
        // URL names them itself: who holds which connection is then plain to an operator.
        let mut options: sqlx::postgres::PgConnectOptions = url.parse()?;
        if options.get_application_name().is_none() {
            options = options.application_name(&format!("taskexec/{}", std::process::id()));
        }
        let maintenance = PgPoolOptions::new()
            .max_connections(MAINTENANCE_POOL_SIZE)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options.clone());
        let pool = match PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
        {
            // The pool retries a refused connection until its timeout and then says only that
            // it timed out; one direct attempt says why (refused, unknown host, bad password).
            Err(sqlx::Error::PoolTimedOut) => {
                use sqlx::Connection;
                let error = sqlx::PgConnection::connect(url).await.err().unwrap_or(sqlx::Error::PoolTimedOut);
                return Err(error.into());
            }
            connected => connected?,
        };
        let (version,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&pool).await?;
        let cockroach = version.contains("CockroachDB");
        let partitioned = if cockroach {
            // Keys in time order would send every insert to one range (crate::ids).
            crate::ids::spread_keys();
            false
        } else {
            warn_if_autovacuum_off(&pool).await;
            super::partitions::is_partitioned(&pool).await?
        };
        Ok(Self {
            pool,
            maintenance,
            cockroach,
            worker_commits: WorkerCommits::default(),
            listen: super::ListenVia::Pool,
            partitioned: partitioned.into(),
        })
    }

    /// Commit the worker's claims and attempt results as `commits` says.
    pub fn with_worker_commits(mut self, commits: WorkerCommits) -> Self {
        self.worker_commits = commits;
        self
    }

    /// Connect LISTEN as `listen` says.
    pub fn with_listen(mut self, listen: super::ListenVia) -> Self {
        self.listen = listen;
        self
    }

    /// A transaction that will write. On PostgreSQL it plans without sequential scans
    /// (`INDEX_PLANS`).
    async fn begin_write(&self) -> StoreResult<Transaction<'static, Postgres>> {
        if self.cockroach {
            return Ok(self.pool.begin().await?);
        }
        Ok(self.pool.begin_with(format!("BEGIN; {INDEX_PLANS}")).await?)
    }

    /// Extend the leases `leases` name; `wait` is how the statement meets a row another holds
    /// (`""`: waits for it; `" SKIP LOCKED"`: passes it over).
    async fn lease_write(&self, leases: &[super::LeaseExtend], wait: &str) -> StoreResult<u64> {
        if leases.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = leases.iter().map(|l| l.execution_id.as_str()).collect();
        let attempts: Vec<i32> = leases.iter().map(|l| l.attempt).collect();
        let for_ms: Vec<i64> = leases.iter().map(|l| l.for_ms).collect();
        // GREATEST: a routine renewal never shortens a lease extended for a long attempt.
        // Rows locked in execution id order first: the module's lock order. Planned at each
        // execution (the module's note on plans).
        let sql = format!(
            "WITH locked AS MATERIALIZED (
                 SELECT e.execution_id, v.for_ms
                 FROM executions AS e
                 JOIN UNNEST($1::text[], $2::int4[], $3::int8[]) AS v(execution_id, attempt, for_ms)
                   ON e.execution_id = v.execution_id AND e.attempt_count = v.attempt
                 WHERE e.status = 'RUNNING'
                 ORDER BY e.execution_id FOR UPDATE OF e{wait})
             UPDATE executions AS e
             SET lease_expires_at = GREATEST(e.lease_expires_at, now() + l.for_ms * INTERVAL '1 millisecond')
             FROM locked AS l
             WHERE e.execution_id = l.execution_id AND e.status = 'RUNNING'"
        );
        // A row finished (moved out of the queue's partition) while this waited for it: once
        // more, it is simply no longer RUNNING (`store::partitions`).
        let done = super::retrying_moved(|| async {
            let mut tx = self.begin_write().await?;
            let done =
                sqlx::query(&sql).persistent(false).bind(&ids).bind(&attempts).bind(&for_ms).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(done)
        })
        .await?;
        Ok(done.rows_affected())
    }

    /// A transaction of the worker's own bookkeeping: a claim, or a batch of attempt results.
    /// Unless they are to be durable at once, they commit without waiting for their WAL flush
    /// (`synchronous_commit = off` for this transaction only; the WAL writer flushes within
    /// three `wal_writer_delay`s). A PostgreSQL crash can then forget the last such commits,
    /// and what it forgets is redone, never lost: a forgotten claim leaves its executions
    /// queued, a forgotten result leaves its execution RUNNING until its lease expires and
    /// the reclaimer retries it; at least once holds either way. CockroachDB has no such
    /// setting.
    async fn begin_bookkeeping(&self) -> StoreResult<Transaction<'static, Postgres>> {
        self.begin_worker(false).await
    }

    /// The claim's transaction: bookkeeping, and the claim planned once per connection
    /// (`force_generic_plan`). Planning the claim takes 2-3 ms, as long as executing it, and
    /// its one plan is right at any table size: every step is an index probe or a range scan
    /// bounded by LIMIT, and the update finds its rows by primary key (see `execution_claim`).
    async fn begin_claim(&self) -> StoreResult<Transaction<'static, Postgres>> {
        self.begin_worker(true).await
    }

    async fn begin_worker(&self, generic_plan: bool) -> StoreResult<Transaction<'static, Postgres>> {
        if self.cockroach {
            return self.begin_write().await;
        }
        let begin = match (self.worker_commits, generic_plan) {
            (WorkerCommits::Deferred, false) => "BEGIN; SET LOCAL synchronous_commit = off",
            (WorkerCommits::Deferred, true) => {
                "BEGIN; SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = force_generic_plan"
            }
            (_, true) => "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan",
            (_, false) => return self.begin_write().await,
        };
        let claim = if generic_plan { CLAIM_PLANS } else { "" };
        Ok(self.pool.begin_with(format!("{begin}; {INDEX_PLANS}{claim}")).await?)
    }
}

/// What every write transaction sets on PostgreSQL: no plan reads a whole table where an
/// index serves. `executions_live` is as large as the queue (`store::partitions`): nearly
/// empty when the vacuumer's ANALYZE last counted it, a hundred thousand rows a moment later
/// when a burst of jobs arrives. A plan made for the small table, and kept (the claim's is
/// generic on purpose; others are cached after five runs), then read the whole table for
/// each row it wanted: `auto_explain` caught a claim of 100 scanning all 31,759 queued rows
/// once, then the table again for each of the 100 (175,671 buffers, 1.9 s) in the soak. Every
/// statement of the queue is written for its indexes; with sequential scans priced out
/// the planner takes them whatever the statistics say. And no JIT: a sequential scan priced
/// out lifts a plan's cost past `jit_above_cost`, and compiling a statement of the queue
/// takes longer (0.4-0.9 s, measured) than running it.
const INDEX_PLANS: &str = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off";

/// What the claim's transaction sets besides: its rows come from its index in `run_at` order,
/// a few per endpoint (`LIMIT`); a bitmap scan reads every due row of the endpoint and sorts
/// them, which a plan for a near-empty partition takes for the cheaper way (it read 25,001
/// rows of each endpoint for 25). (Pricing out sorts as well made the update's search of its
/// 45 rows by primary key take 580 ms, for a reason not found.)
const CLAIM_PLANS: &str = "; SET LOCAL enable_bitmapscan = off";

impl PgStore {
    /// The fenced execution writes of a batch in one statement: the batch's columns travel as
    /// arrays and UNNEST turns them back into rows, so a batch of 128 costs one round trip.
    async fn finish_fenced(
        tx: &mut Transaction<'_, Postgres>,
        finishes: &[super::AttemptFinish],
    ) -> StoreResult<Vec<bool>> {
        let ids: Vec<&str> = finishes.iter().map(|f| f.execution_id.as_str()).collect();
        let attempts: Vec<i32> = finishes.iter().map(|f| f.attempt_number).collect();
        let statuses: Vec<&str> = finishes.iter().map(|f| f.execution_status.as_str()).collect();
        let outputs: Vec<Option<sqlx::types::Json<&serde_json::Value>>> =
            finishes.iter().map(|f| f.output.as_ref().map(sqlx::types::Json)).collect();
        let completed: Vec<Option<chrono::DateTime<chrono::Utc>>> =
            finishes.iter().map(|f| f.execution_status.is_finished().then_some(f.completed_at)).collect();
        let durations: Vec<i32> = finishes.iter().map(|f| f.duration_ms).collect();
        let retry_at: Vec<Option<chrono::DateTime<chrono::Utc>>> = finishes.iter().map(|f| f.retry_at).collect();
        // Rows locked in execution id order first: the module's lock order. Prepared, unlike
        // the other batch statements (the module's note on plans): planning it for each batch
        // cost the drain more than a plan kept, which probes the primary key per id.
        let rows: Vec<(String,)> = sqlx::query_as(sql::RESULT_WRITE)
            .bind(&ids)
            .bind(&attempts)
            .bind(&statuses)
            .bind(&outputs)
            .bind(&completed)
            .bind(&durations)
            .bind(&retry_at)
            .fetch_all(&mut **tx)
            .await?;
        let won: std::collections::HashSet<&str> = rows.iter().map(|(id,)| id.as_str()).collect();
        Ok(finishes.iter().map(|f| won.contains(f.execution_id.as_str())).collect())
    }

    /// The attempts and log lines of the outcomes that won the fence: one INSERT each, their
    /// columns as arrays. The statements' text never changes, so each connection prepares them
    /// once; multi-row VALUES lists are a new statement for every batch size, which overflowed
    /// the per-connection statement cache and re-parsed on most batches.
    async fn record_attempts(tx: &mut Transaction<'_, Postgres>, winners: &[&super::AttemptFinish]) -> StoreResult<()> {
        if winners.is_empty() {
            return Ok(());
        }
        let ids: Vec<AttemptId> = winners.iter().map(|_| AttemptId::new()).collect();
        let ids: Vec<&str> = ids.iter().map(AttemptId::as_str).collect();
        let executions: Vec<&str> = winners.iter().map(|f| f.execution_id.as_str()).collect();
        let numbers: Vec<i32> = winners.iter().map(|f| f.attempt_number).collect();
        let statuses: Vec<&str> = winners.iter().map(|f| f.attempt_status.as_str()).collect();
        let started: Vec<chrono::DateTime<chrono::Utc>> = winners.iter().map(|f| f.started_at).collect();
        let completed: Vec<chrono::DateTime<chrono::Utc>> = winners.iter().map(|f| f.completed_at).collect();
        let durations: Vec<i32> = winners.iter().map(|f| f.duration_ms).collect();
        let outputs: Vec<Option<sqlx::types::Json<&serde_json::Value>>> =
            winners.iter().map(|f| f.output.as_ref().map(sqlx::types::Json)).collect();
        let errors: Vec<Option<sqlx::types::Json<&serde_json::Value>>> =
            winners.iter().map(|f| f.error.as_ref().map(sqlx::types::Json)).collect();
        sqlx::query(sql::ATTEMPTS_INSERT)
            .bind(&ids)
            .bind(&executions)
            .bind(&numbers)
            .bind(&statuses)
            .bind(&started)
            .bind(&completed)
            .bind(&durations)
            .bind(&outputs)
            .bind(&errors)
            .execute(&mut **tx)
            .await?;
        let logs: Vec<(&super::AttemptFinish, &super::LogWrite)> =
            winners.iter().flat_map(|f| f.logs.iter().map(move |log| (*f, log))).collect();
        if logs.is_empty() {
            return Ok(());
        }
        let ids: Vec<LogId> = logs.iter().map(|_| LogId::new()).collect();
        let ids: Vec<&str> = ids.iter().map(LogId::as_str).collect();
        let executions: Vec<&str> = logs.iter().map(|(f, _)| f.execution_id.as_str()).collect();
        let numbers: Vec<i32> = logs.iter().map(|(f, _)| f.attempt_number).collect();
        let levels: Vec<&str> = logs.iter().map(|(_, log)| log.level).collect();
        let messages: Vec<&str> = logs.iter().map(|(_, log)| log.message.as_str()).collect();
        let logged: Vec<chrono::DateTime<chrono::Utc>> = logs.iter().map(|(_, log)| log.logged_at).collect();
        sqlx::query(sql::LOGS_INSERT)
            .bind(&ids)
            .bind(&executions)
            .bind(&numbers)
            .bind(&levels)
            .bind(&messages)
            .bind(&logged)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

impl PgStore {
    /// A batch of cron ticks in two statements: every job's compare-and-set in one UPDATE, then
    /// the executions of the ticks that won in one INSERT (both fed by UNNEST of arrays).
    async fn advance_ticks(
        tx: &mut Transaction<'_, Postgres>,
        advances: &[super::CronAdvance],
    ) -> StoreResult<Vec<bool>> {
        let ids: Vec<&str> = advances.iter().map(|a| a.job_id.as_str()).collect();
        let ticks: Vec<chrono::DateTime<chrono::Utc>> = advances.iter().map(|a| a.tick).collect();
        let next: Vec<Option<chrono::DateTime<chrono::Utc>>> = advances.iter().map(|a| a.next).collect();
        // Planned at each execution (the module's note on plans).
        let moved: Vec<(String,)> = sqlx::query_as(sql::TICKS_ADVANCE)
            .persistent(false)
            .bind(&ids)
            .bind(&ticks)
            .bind(&next)
            .bind(advances.iter().map(|a| a.last).collect::<Vec<_>>())
            .fetch_all(&mut **tx)
            .await?;
        let won: std::collections::HashSet<&str> = moved.iter().map(|(id,)| id.as_str()).collect();
        let executions: Vec<&super::ExecutionWrite> =
            advances.iter().filter(|a| won.contains(a.job_id.as_str())).filter_map(|a| a.execution.as_ref()).collect();
        Self::insert_executions(tx, &executions, &INSERT_EXECUTIONS).await?;
        Ok(advances.iter().map(|a| won.contains(a.job_id.as_str())).collect())
    }

    /// New executions in one INSERT fed by UNNEST of arrays, by `statement`
    /// ([`INSERT_EXECUTIONS`], or [`INSERT_EXECUTIONS_OF_NEW_JOBS`]).
    async fn insert_executions(
        tx: &mut Transaction<'_, Postgres>,
        executions: &[&super::ExecutionWrite],
        statement: &str,
    ) -> StoreResult<()> {
        if executions.is_empty() {
            return Ok(());
        }
        let mut args = PgArguments::default();
        push_execution_arrays(&mut args, executions)?;
        sqlx::query_with(statement, args).execute(&mut **tx).await?;
        Ok(())
    }

    /// Jobs and their executions in one INSERT each, in the caller's transaction.
    async fn insert_jobs(
        tx: &mut Transaction<'_, Postgres>,
        jobs: &[(&super::JobWrite, Option<&super::ExecutionWrite>)],
    ) -> StoreResult<Vec<Option<super::Job>>> {
        let mut args = PgArguments::default();
        push_job_arrays(&mut args, jobs)?;
        let inserted: Vec<(String,)> = sqlx::query_as_with(&INSERT_JOBS, args).fetch_all(&mut **tx).await?;
        let created = created_in_order(jobs, inserted);
        let executions: Vec<&super::ExecutionWrite> =
            jobs.iter().zip(&created).filter(|(_, c)| c.is_some()).filter_map(|((_, e), _)| *e).collect();
        Self::insert_executions(tx, &executions, &INSERT_EXECUTIONS_OF_NEW_JOBS).await?;
        Ok(created)
    }
}

#[async_trait::async_trait]
impl SqlBackend for PgStore {
    fn db(&self) -> Db<'_> {
        Db::Postgres(&self.pool)
    }

    async fn write(&self) -> StoreResult<Tx> {
        Ok(Tx::Postgres(self.begin_write().await?))
    }

    /// Jobs (and the executions of those inserted), committed. A job whose (endpoint,
    /// idempotency key) is taken, before or earlier in the batch, or whose endpoint is gone, is
    /// passed over (None). The statement that inserts the jobs first holds their endpoints
    /// (`FOR KEY SHARE`, once each: what `fk_jobs_endpoint` did for every row; migration 0066).
    ///
    /// A batch of up to [`ONE_STATEMENT_MAX_JOBS`] is one statement, committed on its own: the
    /// executions' INSERT is a data-modifying CTE fed by the jobs' `RETURNING`, so the batch
    /// costs one round trip where BEGIN, two INSERTs and COMMIT cost four. That is what
    /// concurrent `POST /jobs` requests make (`JobWriter` writes them together, ~15 at a time
    /// with 32 clients): +10% creates/s, interleaved A/B on 2026-11-26. Larger batches take the
    /// two INSERTs in a transaction: while executions had a foreign key to jobs (until migration
    /// 0066), `auto_explain` showed its check twice as slow when the jobs it read were inserted
    /// by the same statement (29 against 14 ms for 1,000 rows), and `POST /jobs/batch` of 1,000
    /// lost 8% written the one way. Without it, one statement for every size measured the same
    /// (three runs each, 2026-11-27: 43,199 · 43,112 · 44,642 against 39,347 · 43,165 · 45,756
    /// jobs/s), so the split stays. CockroachDB always takes the transaction.
    async fn jobs_write(
        &self,
        jobs: &[(&super::JobWrite, Option<&super::ExecutionWrite>)],
    ) -> StoreResult<Vec<Option<super::Job>>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        if self.cockroach || jobs.len() > ONE_STATEMENT_MAX_JOBS {
            let mut tx = self.begin_write().await?;
            let created = Self::insert_jobs(&mut tx, jobs).await?;
            tx.commit().await?;
            return Ok(created);
        }
        let executions: Vec<&super::ExecutionWrite> = jobs.iter().filter_map(|(_, e)| *e).collect();
        let mut args = PgArguments::default();
        push_job_arrays(&mut args, jobs)?;
        push_execution_arrays(&mut args, &executions)?;
        let inserted: Vec<(String,)> =
            sqlx::query_as_with(&INSERT_JOBS_WITH_EXECUTIONS, args).fetch_all(&self.pool).await?;
        Ok(created_in_order(jobs, inserted))
    }

    async fn ticks_advance(&self, tx: &mut Tx, advances: &[super::CronAdvance]) -> StoreResult<Vec<bool>> {
        Self::advance_ticks(tx.postgres(), advances).await
    }

    async fn bookkeeping(&self) -> StoreResult<Tx> {
        Ok(Tx::Postgres(self.begin_bookkeeping().await?))
    }

    async fn results_fence(&self, tx: &mut Tx, finishes: &[super::AttemptFinish]) -> StoreResult<Vec<bool>> {
        Self::finish_fenced(tx.postgres(), finishes).await
    }

    async fn results_record(&self, tx: &mut Tx, winners: &[&super::AttemptFinish]) -> StoreResult<()> {
        Self::record_attempts(tx.postgres(), winners).await
    }

    async fn audit_write(&self, records: &[super::AuditRecord]) -> StoreResult<()> {
        let column = |f: fn(&super::AuditRecord) -> Option<&str>| records.iter().map(f).collect::<Vec<_>>();
        let at: Vec<chrono::DateTime<chrono::Utc>> = records.iter().map(|r| r.at).collect();
        let status: Vec<i32> = records.iter().map(|r| r.status).collect();
        sqlx::query(sql::AUDIT_INSERT)
            .bind(column(|r| Some(r.audit_id.as_str())))
            .bind(column(|r| Some(r.tenant.as_str())))
            .bind(column(|r| r.key_id.as_deref()))
            .bind(column(|r| r.role.map(crate::domain::KeyRole::as_str)))
            .bind(column(|r| Some(r.method.as_str())))
            .bind(column(|r| Some(r.route.as_str())))
            .bind(column(|r| Some(r.path.as_str())))
            .bind(&status)
            .bind(column(|r| Some(r.request_id.as_str())))
            .bind(&at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn purged_by_row(&self) -> StoreResult<Vec<String>> {
        if self.partitioned.load(std::sync::atomic::Ordering::Relaxed) {
            super::partitions::deleted_by_row(&self.pool, "executions_done").await
        } else {
            Ok(vec!["executions".to_owned()])
        }
    }
}

#[async_trait::async_trait]
impl Claims for PgStore {
    async fn execution_claim(&self, claim: &super::ClaimParams) -> StoreResult<Vec<Execution>> {
        // Another worker's claim and result may move a row this one saw queued out of the
        // queue's partition before this reaches it: once more (`store::retrying_moved`).
        super::retrying_moved(|| self.claim_once(claim)).await
    }

    async fn execution_lease_extend(&self, leases: &[super::LeaseExtend]) -> StoreResult<u64> {
        self.lease_write(leases, "").await
    }

    async fn execution_lease_renew(&self, leases: &[super::LeaseExtend]) -> StoreResult<u64> {
        // A row held this instant is having its result written: it needs no lease, and where
        // history is partitioned, waiting for it would end in a serialization error once the
        // result moved it out of the queue's partition (`store::partitions`).
        self.lease_write(leases, " SKIP LOCKED").await
    }

    async fn execution_finish_many(&self, finishes: &[super::AttemptFinish]) -> StoreResult<FinishedAttempts> {
        finish_many(self, finishes).await
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut migrator = sqlx::migrate!("../migrations/postgres");
        // One lock for PostgreSQL and CockroachDB alike: a row (see `MigrationLock`), since
        // CockroachDB has no advisory locks, the migrator's own way.
        migrator.set_locking(false);
        let lock = MigrationLock::acquire(&self.pool).await?;
        let result = async {
            accept_rewritten_migrations(&self.pool, &migrator).await?;
            migrator.run(&self.pool).await?;
            if !self.cockroach {
                super::partitions::convert(&self.pool).await?;
                self.partitioned.store(true, std::sync::atomic::Ordering::Relaxed);
                sqlx::raw_sql(AUTOVACUUM).execute(&self.pool).await?;
            }
            StoreResult::Ok(())
        }
        .await;
        lock.release(&self.pool).await?;
        result
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn pool_connections(&self) -> (u32, usize) {
        (self.pool.size(), self.pool.num_idle())
    }

    async fn history_kept_from(&self) -> StoreResult<Option<chrono::DateTime<chrono::Utc>>> {
        if !self.partitioned.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(None);
        }
        let spans = super::partitions::list(&self.pool, "executions_done").await?;
        Ok(spans.iter().filter_map(|p| p.from).min())
    }

    async fn history_upkeep(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        window: Duration,
        cutoff: Option<chrono::DateTime<chrono::Utc>>,
        budget: Duration,
    ) -> StoreResult<super::HistoryUpkept> {
        if !self.partitioned.load(std::sync::atomic::Ordering::Relaxed) {
            return Ok(super::HistoryUpkept::default());
        }
        super::partitions::upkeep(&self.maintenance, now, window, cutoff, budget).await
    }

    async fn signal(&self, signal: Signal) -> StoreResult<()> {
        if !self.cockroach {
            sqlx::query("SELECT pg_notify($1, '')").bind(signal.channel()).execute(&self.pool).await?;
        }
        Ok(())
    }

    async fn table_churn(&self) -> StoreResult<super::Churn> {
        if self.cockroach {
            return Ok(super::Churn::default());
        }
        maintenance::churn(&self.maintenance).await
    }

    async fn vacuum(&self, table: &str) -> StoreResult<()> {
        maintenance::vacuum(&self.maintenance, table).await
    }

    async fn listen(&self, signals: &[(Signal, Arc<tokio::sync::Notify>)]) -> StoreResult<bool> {
        let mut listener = match &self.listen {
            _ if self.cockroach => return Ok(false),
            super::ListenVia::Off => return Ok(false),
            super::ListenVia::Pool => PgListener::connect_with(&self.pool).await?,
            super::ListenVia::Url(url) => PgListener::connect(url).await?,
        };
        listener.listen_all(signals.iter().map(|(signal, _)| signal.channel())).await?;
        let signals = signals.to_vec();
        tokio::spawn(async move {
            // recv() reconnects by itself after a dropped connection; while it is down the
            // listeners fall back to polling or expiry.
            loop {
                match listener.recv().await {
                    Ok(told) => signals
                        .iter()
                        .filter(|(s, _)| s.channel() == told.channel())
                        .for_each(|(_, wake)| wake.notify_waiters()),
                    Err(error) => {
                        tracing::warn!(%error, "Lost the LISTEN connection; retrying.");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
