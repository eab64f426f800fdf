//! Storage: the one [`Store`] interface the rest of the service talks to, and its two backends.
//!
//! - [`postgres`]: PostgreSQL, and through it CockroachDB (the production, scale-out backend).
//! - [`sqlite`]: embedded SQLite in WAL mode (the default: one file, no other service).
//!
//! [`Store`] is one contract per aggregate, each a trait of its own joined as supertraits:
//! [`Access`], [`Documents`], [`Endpoints`], [`Jobs`], [`Executions`], [`History`],
//! [`Schedules`], [`Claims`], [`Plugins`] and [`Regions`]. Their statements are in
//! `sql/<aggregate>.sql`, and their methods are written once, as plain Rust over `sql::query`,
//! for every backend (`impl<S: SqlBackend>`), except the worker's [`Claims`]: claims, leases
//! and a batch of results are where the two databases differ most, and each backend implements
//! them in its own module. What else a backend does its own way is `sql::SqlBackend`'s (how a
//! write transaction begins, a batch of jobs or cron ticks) and `sql::DIALECT`'s (the phrases
//! the two spell differently). `Store` itself keeps what is a backend's alone: migrations,
//! signals between processes, and the upkeep of PostgreSQL's tables.
//!
//! The store persists and fetches; the rules are the callers'. Where a rule must be applied
//! inside a write's transaction to hold under concurrency (a circuit breaker hearing an
//! attempt's outcome, a rate-limited endpoint's token bucket paying for a claim), the store
//! calls the rule's code in `crate::flow` and returns what it decided
//! ([`FinishedAttempts::circuit_changes`]) for the caller to record.
//! [`coalesce`] makes the store calls of many concurrent requests as one.

mod access;
mod audit;
mod claims;
pub mod coalesce;
#[cfg(test)]
mod conformance;
mod documents;
mod endpoints;
mod engine;
mod error;
mod executions;
mod history;
mod jobs;
mod keys;
pub mod partitions;
mod plugins;
pub mod postgres;
mod regions;
mod resources;
mod schedules;
mod sql;
pub mod sqlite;
pub mod storable;
mod time;
mod writes;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::ids::JobId;

pub use access::{Access, ActiveKey, Tenant, TenantKey, TenantKeyWrite, DEFAULT_TENANT};
pub use audit::{Audit, AuditRecord};
pub use claims::Claims;
pub use documents::Documents;
pub use endpoints::Endpoints;
pub use engine::{
    is_queue_table, ActivitySample, Attempt, AttemptFinish, CircuitChange, ClaimParams, CronAdvance, EndpointShares,
    Execution, ExecutionFilter, ExecutionLog, FinishedAttempts, Job, JobFilter, JobStats, LeaseExtend, LogWrite,
    PluginRecord, PluginWrite, READY_AHEAD,
};
pub(crate) use error::retrying_moved;
pub use error::StoreError;
pub use executions::Executions;
pub use history::History;
pub use jobs::Jobs;
pub use keys::{KeyRef, Keys};
pub use plugins::Plugins;
pub use regions::Regions;
pub use resources::{Config, Endpoint, EndpointWrite, PayloadSpec, Secret, ShownTo};
pub use schedules::Schedules;
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
    /// The same outcome of another row (the row as shown to a tenant, say).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Inserted<U> {
        match self {
            Self::Created(row) => Inserted::Created(f(row)),
            Self::Existing(row) => Inserted::Existing(f(row)),
        }
    }

    /// An insert that found its name taken: the row read back under it. None means the
    /// conflicting row was deleted between the insert and the read: the conflict is reported
    /// rather than pretend the insert happened.
    pub fn existing(row: Option<T>) -> StoreResult<Self> {
        row.map(Self::Existing).ok_or(StoreError::UniqueViolation)
    }
}

/// Which finished executions [`Executions::execution_ids_finished`] looks for.
#[derive(Debug, Clone)]
pub enum FinishedScope {
    /// Created before this time (the retention purge).
    CreatedBefore(DateTime<Utc>),
    /// Of this job (`DELETE /jobs/{id}`).
    Job(JobId),
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
    /// An abort of a delivery in flight was asked for: wake the workers' abort watchers.
    AbortRequested,
}

impl Signal {
    /// The PostgreSQL channel it travels on.
    pub fn channel(self) -> &'static str {
        match self {
            Self::WorkReady => "taskexec_work",
            Self::PluginsChanged => "taskexec_plugins",
            Self::CronChanged => "taskexec_cron",
            Self::AbortRequested => "taskexec_abort",
        }
    }
}

/// The storage interface. Methods are named noun-then-verb.
#[async_trait]
pub trait Store:
    Access
    + Audit
    + Claims
    + Documents
    + Endpoints
    + Executions
    + History
    + Jobs
    + Keys
    + Plugins
    + Regions
    + Schedules
    + Send
    + Sync
    + 'static
{
    fn backend(&self) -> Backend;
    /// Apply every pending migration of this backend.
    async fn migrate(&self) -> StoreResult<()>;
    /// A cheap round trip, for `/readyz`.
    async fn ping(&self) -> StoreResult<()>;
    /// The connection pool: (connections open, of which idle).
    fn pool_connections(&self) -> (u32, usize);
    /// Tell other processes something changed (PostgreSQL NOTIFY; a no-op where the database
    /// has no such channel).
    async fn signal(&self, signal: Signal) -> StoreResult<()>;
    /// Wake each signal's `Notify` whenever another process sends that signal, all through one
    /// connection. False where unsupported: the process then relies on polling (work, aborts)
    /// or expiry (plugin versions).
    async fn listen(&self, signals: &[(Signal, Arc<tokio::sync::Notify>)]) -> StoreResult<bool>;

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
