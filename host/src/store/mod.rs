//! Storage: the one [`Store`] interface the rest of the service talks to, and its two backends.
//!
//! - [`postgres`]: PostgreSQL, and through it CockroachDB (the production, scale-out backend).
//! - [`sqlite`]: embedded SQLite in WAL mode (the default: one file, no other service).
//!
//! [`Store`] is one contract per aggregate, each a trait of its own joined as supertraits:
//! [`Access`], [`Documents`], [`Endpoints`], [`History`], [`Plugins`] and [`Regions`], whose
//! statements are in `sql/<aggregate>.sql` and whose methods are written once, as plain Rust
//! over `sql::query`, for every backend (`impl<S: SqlBackend>`). The jobs', the scheduler's and
//! the worker's methods are still `Store`'s own: written once in `common` and stamped onto each
//! backend by `impl_store!`, with a query the two databases must phrase differently in its
//! backend's module under the same method name.
//!
//! The store persists and fetches; the rules are the callers'. Where a rule must be applied
//! inside a write's transaction to hold under concurrency (a circuit breaker hearing an
//! attempt's outcome, a rate-limited endpoint's token bucket paying for a claim), the store
//! calls the rule's code in `crate::flow` and returns what it decided
//! ([`FinishedAttempts::circuit_changes`]) for the caller to record.
//! [`coalesce`] makes the store calls of many concurrent requests as one.

mod access;
pub mod coalesce;
mod common;
#[cfg(test)]
mod conformance;
mod documents;
mod endpoints;
mod engine;
mod error;
mod history;
pub mod partitions;
mod plugins;
pub mod postgres;
mod regions;
mod resources;
mod sql;
pub mod sqlite;
pub mod storable;
mod time;
mod writes;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use access::Access;
pub use documents::Documents;
pub use endpoints::Endpoints;
pub use engine::{
    is_queue_table, ActivitySample, Attempt, AttemptFinish, CircuitChange, ClaimParams, CronAdvance, EndpointShares,
    Execution, ExecutionFilter, ExecutionLog, FinishedAttempts, Job, JobFilter, JobStats, LeaseExtend, LogWrite,
    PluginRecord, PluginWrite, READY_AHEAD,
};
pub(crate) use error::retrying_moved;
pub use error::StoreError;
pub use history::History;
pub use plugins::Plugins;
pub use regions::Regions;
pub use resources::{Config, Endpoint, EndpointWrite, PayloadSpec, Secret};
pub use time::{now, DbTime};
pub use writes::{ExecutionWrite, JobWrite, NewJob};

pub type StoreResult<T> = Result<T, StoreError>;

/// The idempotency key of a retry is this prefix and the id of the execution it retries: at
/// most one retry per execution, whoever asks and however often.
pub const RETRY_KEY_PREFIX: &str = "retry:";

/// Which backend a store is, for the few places (start-up messages, key policy) that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A page request: items strictly after `after` in (created_at, key) order, or strictly
/// before it newest first (lists that offer `?order=newest`: jobs and executions).
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub after: Option<PageKey>,
    /// How many rows to fetch; callers ask for one more than they show to learn if more exist.
    pub limit: i64,
    pub newest_first: bool,
}

/// The position of a row in a list: its creation time and its unique key (name or id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageKey {
    pub created_at: DateTime<Utc>,
    pub key: String,
}

/// The outcome of an insert keyed by a name: the new row, or the row already under that name.
#[derive(Debug)]
pub enum Inserted<T> {
    Created(T),
    Existing(T),
}

impl<T> Inserted<T> {
    /// An insert that found its name taken: the row read back under it. None means the
    /// conflicting row was deleted between the insert and the read: the conflict is reported
    /// rather than pretend the insert happened.
    pub fn existing(row: Option<T>) -> StoreResult<Self> {
        row.map(Self::Existing).ok_or(StoreError::UniqueViolation)
    }
}

/// Which finished executions [`Store::execution_ids_finished`] looks for.
#[derive(Debug, Clone)]
pub enum FinishedScope {
    /// Created before this time (the retention purge).
    CreatedBefore(DateTime<Utc>),
    /// Of this job (`DELETE /jobs/{id}`).
    Job(String),
    /// Of this endpoint (`DELETE /endpoints/{name}`).
    Endpoint(String),
}

/// The outcome of a delete that other rows may block.
#[derive(Debug, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    NotFound,
    /// Still referenced; the names or ids of (up to 20 of) the referencing rows.
    InUse(Vec<String>),
}

/// Dead and live rows of the queue's tables, as the database counts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Churn {
    /// Whether the database's own autovacuum runs.
    pub autovacuum: bool,
    /// `(table, dead rows, live rows)`.
    pub tables: Vec<(String, i64, i64)>,
}

/// What one round of [`Store::history_upkeep`] did: the partitions it made and dropped.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HistoryUpkept {
    pub made: Vec<String>,
    pub dropped: Vec<String>,
    /// The finished executions in the partitions dropped, as PostgreSQL last counted them
    /// (`ANALYZE`, run once as each partition's span ends).
    pub executions_dropped: i64,
    /// The one-shot jobs deleted with their first execution's partition.
    pub jobs_purged: i64,
    /// The round stopped at its deadline with jobs of expired partitions still to delete:
    /// the next should follow at once, or the purge falls behind what is made.
    pub behind: bool,
}

/// What one process tells the others through the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Executions became claimable: wake the workers.
    WorkReady,
    /// A plugin version was installed or removed: forget cached newest versions.
    PluginsChanged,
    /// A cron job was created, rescheduled or resumed: wake the schedulers' materializers, so
    /// its next tick is made ahead of its time rather than at their next pass.
    CronChanged,
}

impl Signal {
    /// The PostgreSQL channel it travels on.
    pub fn channel(self) -> &'static str {
        match self {
            Self::WorkReady => "taskexec_work",
            Self::PluginsChanged => "taskexec_plugins",
            Self::CronChanged => "taskexec_cron",
        }
    }
}

/// The storage interface. Methods are named noun-then-verb.
#[async_trait]
pub trait Store: Access + Documents + Endpoints + History + Plugins + Regions + Send + Sync + 'static {
    fn backend(&self) -> Backend;
    /// Apply every pending migration of this backend.
    async fn migrate(&self) -> StoreResult<()>;
    /// A cheap round trip, for `/readyz`.
    async fn ping(&self) -> StoreResult<()>;
    /// The connection pool: (connections open, of which idle).
    fn pool_connections(&self) -> (u32, usize);
    /// The next ticks of active, unpaused CRON jobs, soonest first.
    async fn cron_upcoming(&self, limit: i64) -> StoreResult<Vec<Job>>;

    // ---- jobs ----

    /// Insert a job and, for a one-shot job, its execution, in one transaction. When a job with
    /// the same (endpoint, idempotency_key) exists, nothing is written and it is returned.
    /// [`StoreError::ForeignKeyViolation`] when its endpoint is gone (deleted meanwhile).
    async fn job_insert(&self, job: &JobWrite, execution: Option<&ExecutionWrite>) -> StoreResult<Inserted<Job>>;
    /// [`Store::job_insert`] for many jobs in one write; each answered in order, on its own (a
    /// job whose endpoint is gone is `Err(ForeignKeyViolation)`, the others are written). A key
    /// used twice in the batch: the second finds the first. The outer error: nothing written.
    async fn job_insert_many(
        &self,
        jobs: &[(&JobWrite, Option<&ExecutionWrite>)],
    ) -> StoreResult<Vec<StoreResult<Inserted<Job>>>>;
    async fn job_get(&self, job_id: &str) -> StoreResult<Option<Job>>;
    async fn job_list(&self, filter: &JobFilter, page: &PageRequest) -> StoreResult<Vec<Job>>;
    /// Retire `old_job_id` (if still ACTIVE) and insert `new` as its next version, linked both
    /// ways, in one transaction. None when the old job was no longer active;
    /// [`StoreError::ForeignKeyViolation`] when `new`'s endpoint is gone.
    async fn job_replace(&self, old_job_id: &str, new: &JobWrite) -> StoreResult<Option<Job>>;
    /// ACTIVE to RETIRED; whether it changed.
    async fn job_retire(&self, job_id: &str) -> StoreResult<bool>;
    /// Delete a job with its executions, attempts and logs, unless an execution of it is
    /// unfinished (`InUse` names them).
    async fn job_delete(&self, job_id: &str) -> StoreResult<Deleted>;
    /// Delete up to `limit` one-shot jobs and retired cron versions created before `before`
    /// that have no execution left; how many.
    async fn job_purge_finished(&self, before: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    /// Up to `limit` finished (SUCCESS, FAILED, CANCELLED) executions in `scope`, oldest first.
    async fn execution_ids_finished(&self, scope: &FinishedScope, limit: i64) -> StoreResult<Vec<String>>;
    /// Delete these executions with their attempts and logs, in one short transaction, those
    /// still finished; how many.
    async fn execution_delete_finished(&self, ids: &[String]) -> StoreResult<u64>;
    /// Pause an ACTIVE, unpaused CRON job: no more ticks (its next is cleared) and its ticks
    /// waiting (made ahead, or held by `buffer_one`) are removed; whether it changed.
    async fn job_pause(&self, job_id: &str, at: DateTime<Utc>) -> StoreResult<bool>;
    /// Resume a paused job from `next_run_at`; whether it changed.
    async fn job_resume(&self, job_id: &str, next_run_at: Option<DateTime<Utc>>) -> StoreResult<bool>;
    /// Cancel a job's executions that have not started (PENDING, QUEUED, RETRYING) and retire
    /// the job if any were; the ids cancelled.
    async fn job_cancel_waiting(&self, job_id: &str) -> StoreResult<Vec<String>>;
    async fn job_stats(&self, job_id: &str, completed_since: DateTime<Utc>) -> StoreResult<JobStats>;
    /// Every version of the job's lineage (whichever version `job_id` is), oldest first, a
    /// page at a time.
    async fn job_versions(&self, job_id: &str, page: &PageRequest) -> StoreResult<Vec<Job>>;

    // ---- executions ----

    /// Insert retries (each keyed [`RETRY_KEY_PREFIX`] + the execution it retries) in one
    /// transaction; each as stored: `Created`, or `Existing` when that execution was retried
    /// before (that retry, unchanged), or None when its job was deleted meanwhile.
    async fn execution_retry_many(&self, retries: &[ExecutionWrite]) -> StoreResult<Vec<Option<Inserted<Execution>>>>;
    /// PENDING, QUEUED or RETRYING to CANCELLED; whether it changed.
    async fn execution_cancel(&self, execution_id: &str) -> StoreResult<bool>;

    // ---- scheduler ----

    /// The earliest next tick of an active cron job that may be materialized (one with no tick
    /// still waiting ahead of `now`): when the materializer next has work.
    async fn cron_next_due(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>>;
    /// Active cron jobs whose next tick falls at or before `horizon` and that have no tick
    /// still waiting ahead of `now` (so a job is materialized at most one tick ahead),
    /// earliest first.
    async fn cron_due(&self, now: DateTime<Utc>, horizon: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Job>>;
    /// Record cron ticks in one transaction: for each, compare-and-set the job's next tick and
    /// create the tick's execution (idempotent on its key). Per tick, whether it was recorded
    /// (false: another scheduler advanced that job first).
    async fn cron_advance_many(&self, advances: &[CronAdvance]) -> StoreResult<Vec<bool>>;
    /// PENDING executions whose time has come become QUEUED, and those with no overlap policy
    /// up to `ahead` before their time (a claim never takes one before its `run_at`: the
    /// promotion's own writes are then off the path from a tick's time to its claim); the
    /// `run_at` of each promoted.
    async fn execution_promote_due(
        &self,
        now: DateTime<Utc>,
        ahead: chrono::Duration,
    ) -> StoreResult<Vec<DateTime<Utc>>>;
    /// The earliest `run_at` after `now` of a PENDING execution: when the promoter next has work.
    async fn execution_next_pending(&self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>>;
    /// RUNNING executions whose lease has expired by the database's clock (their worker is
    /// gone: killed, partitioned) are reclaimed: each gets a failed attempt (`WORKER_LOST`) and
    /// becomes RETRYING (or FAILED when out of attempts). `now` is this process's clock, used
    /// where the database is embedded (SQLite).
    async fn execution_reclaim_expired(&self, now: DateTime<Utc>) -> StoreResult<u64>;

    // ---- worker ----

    /// Claim due executions: each becomes RUNNING with its attempt count raised and a lease
    /// of `claim.lease` from the database's clock, and no other worker can claim it meanwhile.
    /// Executions are taken endpoint by endpoint within `claim.shares`: each endpoint with due
    /// work gets an equal part of the claim (up to its allowance), earliest due first within
    /// an endpoint; when the claim has fewer slots than that makes, they go first to the
    /// endpoints this worker holds fewest of (a backlog's endpoint, holding every slot, does
    /// not keep another's due work waiting).
    async fn execution_claim(&self, claim: &ClaimParams) -> StoreResult<Vec<Execution>>;
    /// Extend the leases of executions a worker still holds (never shortening one); how many
    /// were extended (an execution reclaimed or cancelled meanwhile is not).
    async fn execution_lease_extend(&self, leases: &[LeaseExtend]) -> StoreResult<u64>;
    /// The routine renewal of everything a worker holds: [`Store::execution_lease_extend`],
    /// passing over an execution whose row another statement holds this instant (its result
    /// being written), which a lease no longer needs.
    async fn execution_lease_renew(&self, leases: &[LeaseExtend]) -> StoreResult<u64> {
        self.execution_lease_extend(leases).await
    }
    /// Write attempts' outcomes in one transaction, each fenced: an execution is written only
    /// if it is still RUNNING under the attempt number that finished, and only then are the
    /// attempt and its logs recorded. Per finish, whether it was written (false: the fence
    /// held, because the execution was reclaimed or cancelled meanwhile), and the circuit
    /// breakers' transitions the written outcomes made, for the caller to record.
    async fn execution_finish_many(&self, finishes: &[AttemptFinish]) -> StoreResult<FinishedAttempts>;
    /// Tell other processes something changed (PostgreSQL NOTIFY; a no-op where the database
    /// has no such channel).
    async fn signal(&self, signal: Signal) -> StoreResult<()>;
    /// Wake `wake` whenever another process sends `signal`. False where unsupported: the
    /// process then relies on polling (work) or expiry (plugin versions).
    async fn listen(&self, signal: Signal, wake: Arc<tokio::sync::Notify>) -> StoreResult<bool>;

    // ---- upkeep ----

    /// The queue's tables with their dead and live row counts, and whether the database
    /// vacuums them by itself (PostgreSQL's autovacuum). Empty where there is nothing to
    /// vacuum (SQLite reuses deleted pages; CockroachDB collects its own garbage).
    async fn table_churn(&self) -> StoreResult<Churn> {
        Ok(Churn::default())
    }
    /// Vacuum and analyze `table` now, unless another vacuum holds it (then skipped).
    async fn vacuum(&self, table: &str) -> StoreResult<()> {
        let _ = table;
        Ok(())
    }
    /// Where finished history is kept in time partitions (PostgreSQL, `store::partitions`):
    /// the start of the oldest span still kept. A job created before it with no execution
    /// left is one the drops (or the row purge) left behind; one created after it may still
    /// have its execution in a span, so the purge's search for empty jobs stops here instead
    /// of reading every job of the spans not yet dropped. None elsewhere, or with no span.
    async fn history_kept_from(&self) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(None)
    }
    /// Where finished history is kept in time partitions (PostgreSQL, `store::partitions`):
    /// make them spans of `window` ahead of `now`, and drop those wholly older than `cutoff`
    /// (None: keep all), deleting their one-shot jobs for at most about `budget` (the next
    /// round goes on where this one stopped). Elsewhere nothing: the purge deletes by row.
    async fn history_upkeep(
        &self,
        now: DateTime<Utc>,
        window: std::time::Duration,
        cutoff: Option<DateTime<Utc>>,
        budget: std::time::Duration,
    ) -> StoreResult<HistoryUpkept> {
        let _ = (now, window, cutoff, budget);
        Ok(HistoryUpkept::default())
    }
}

/// Open the store the configuration names: PostgreSQL for a `postgres://` (or
/// `postgresql://`) URL, embedded SQLite for a `sqlite:` URL or a plain file path.
pub async fn connect(database: &DatabaseLocation, pool_size: u32) -> StoreResult<Arc<dyn Store>> {
    connect_with(database, pool_size, WorkerCommits::default(), ListenVia::Pool).await
}

/// [`connect`], with the worker's claims and results committed as `worker_commits` says.
pub async fn connect_with(
    database: &DatabaseLocation,
    pool_size: u32,
    worker_commits: WorkerCommits,
    listen: ListenVia,
) -> StoreResult<Arc<dyn Store>> {
    Ok(match database {
        DatabaseLocation::Postgres(url) => Arc::new(
            postgres::PgStore::connect(url, pool_size).await?.with_worker_commits(worker_commits).with_listen(listen),
        ),
        DatabaseLocation::Sqlite(path) => Arc::new(sqlite::SqliteStore::connect(path, pool_size).await?),
    })
}

/// Where PostgreSQL's LISTEN connects (`TE_DATABASE_LISTEN_URL`): LISTEN holds a session,
/// which a transaction-mode pooler hands to other clients between transactions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ListenVia {
    /// A connection like the pool's (to `TE_DATABASE_URL`).
    #[default]
    Pool,
    /// A connection of its own to this URL (PostgreSQL itself, past the pooler).
    Url(String),
    /// No LISTEN: processes poll for work and let cached plugin versions expire.
    Off,
}

/// How PostgreSQL commits the worker's claims and attempt results (`TE_DB_WORKER_COMMITS`).
/// What the API writes (jobs, endpoints, cancels, replays…) is always durable at commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkerCommits {
    /// Without waiting for the WAL flush: a PostgreSQL crash can forget the last fraction of a
    /// second of claims and results, whose executions are then delivered again (at least once
    /// holds; nothing is lost). Each commit no longer waits on the disk.
    #[default]
    Deferred,
    /// Each waits for its WAL flush, as PostgreSQL commits by default.
    Durable,
}

/// Where the data lives, decided once from `TE_DATABASE_URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseLocation {
    Postgres(String),
    Sqlite(std::path::PathBuf),
}

impl DatabaseLocation {
    pub fn backend(&self) -> Backend {
        match self {
            Self::Postgres(_) => Backend::Postgres,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }
}
