//! The SQL both backends run, written once and run on either.
//!
//! - Statements live in this folder's `.sql` files, one per aggregate, each under a
//!   `-- name: StatementName` line (River's `dbsqlc` layout). `build.rs` turns every statement
//!   into a [`Statement`] constant of [`statements`], with its text for each backend, so a
//!   statement is read and reviewed as SQL and a misspelt name fails the build.
//! - What the two databases spell differently is the [`Dialect`], written once below; a
//!   statement names a phrase of it as `/*{phrase}*/` (an SQL comment, so the file stays SQL)
//!   and `build.rs` puts in each backend's phrase.
//! - [`query`] binds the same values for either database ([`Arg`]) and runs on a pool or a
//!   transaction of either ([`Db`], [`Tx`]): the code around a statement is written once, as
//!   ordinary Rust, with no macro stamping it per backend.

mod args;
pub mod pages;
pub mod references;

use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{FromRow, PgPool, Postgres, Sqlite, SqlitePool};

pub use args::Arg;

use super::{AttemptFinish, Backend, CronAdvance, ExecutionWrite, Job, JobWrite, StoreError, StoreResult};

/// A backend the shared SQL runs on: its pool, how it opens a transaction that will write,
/// and the few writes each backend makes its own way (batches: PostgreSQL sends a batch's
/// columns as arrays in one statement, SQLite a statement per row in process).
#[async_trait::async_trait]
pub trait SqlBackend: Send + Sync {
    fn db(&self) -> Db<'_>;
    /// A transaction that will write (SQLite takes its write lock at `BEGIN IMMEDIATE`: a
    /// deferred read-then-write transaction can fail under WAL instead of waiting for it).
    async fn write(&self) -> StoreResult<Tx>;
    /// Jobs (and the executions of those inserted), committed. A job whose (endpoint,
    /// idempotency key) is taken, before or earlier in the batch, or whose endpoint is gone,
    /// is passed over (None).
    async fn jobs_write(&self, jobs: &[(&JobWrite, Option<&ExecutionWrite>)]) -> StoreResult<Vec<Option<Job>>>;
    /// A batch of cron ticks in `tx`: each job's compare-and-set of its next tick, then the
    /// executions of the ticks that won it. Per tick, whether it won.
    async fn ticks_advance(&self, tx: &mut Tx, advances: &[CronAdvance]) -> StoreResult<Vec<bool>>;
    /// The transaction a batch of attempt results is written in (`Claims::execution_finish_many`):
    /// by default an ordinary write (SQLite's `synchronous = NORMAL` already leaves the last
    /// commits to an OS crash); PostgreSQL may commit it without waiting for its WAL flush.
    async fn bookkeeping(&self) -> StoreResult<Tx> {
        self.write().await
    }
    /// A batch's fenced execution writes: each execution written only if it is still RUNNING
    /// under the attempt number that finished. Per finish, whether it was.
    async fn results_fence(&self, tx: &mut Tx, finishes: &[AttemptFinish]) -> StoreResult<Vec<bool>>;
    /// The attempts and log lines of the outcomes that won the fence.
    async fn results_record(&self, tx: &mut Tx, winners: &[&AttemptFinish]) -> StoreResult<()>;
    /// A batch of audit records, committed (`Audit::audit_insert_many`; never empty).
    async fn audit_write(&self, records: &[crate::store::AuditRecord]) -> StoreResult<()>;
    /// The tables whose finished executions the retention purge deletes row by row: all of
    /// `executions`, or where history is in time partitions, those no drop takes whole.
    async fn purged_by_row(&self) -> StoreResult<Vec<String>> {
        Ok(vec!["executions".to_owned()])
    }
}

/// The statements of this folder's `.sql` files, by file (aggregate) and name.
#[allow(clippy::all)]
pub mod statements {
    include!(concat!(env!("OUT_DIR"), "/statements.rs"));
}

/// One named statement, with its text for each backend.
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    pub postgres: &'static str,
    pub sqlite: &'static str,
}

impl Statement {
    pub fn text(&self, backend: Backend) -> &'static str {
        match backend {
            Backend::Postgres => self.postgres,
            Backend::Sqlite => self.sqlite,
        }
    }
}

/// The phrases PostgreSQL and SQLite spell differently, by the name a statement gives them
/// (`/*{lock_shared}*/`). The one table of them: `build.rs` reads it from here.
///
/// - `lock_shared`: what a read adds to hold a row as a foreign key to it would
///   (`FOR KEY SHARE`). PostgreSQL keeps no foreign keys from jobs to endpoints or from
///   executions to jobs (migration 0066), so the store takes those locks itself; SQLite keeps
///   its foreign keys, and its write transactions run one at a time.
/// - `lock_exclusive`: what a read adds to hold a row for its update or delete (`FOR UPDATE`).
/// - `lock_skip_locked`: the same, passing over rows another transaction holds.
/// - `db_now`: "now" in a comparison every process must make against one clock (a lease's
///   expiry): PostgreSQL's own; the embedded SQLite shares its one process's clock, bound as
///   the statement's `$1`.
pub const DIALECT: &[(&str, &str, &str)] = &[
    // (phrase, PostgreSQL, SQLite)
    ("lock_shared", " FOR KEY SHARE", ""),
    ("lock_exclusive", " FOR UPDATE", ""),
    ("lock_skip_locked", " FOR UPDATE SKIP LOCKED", ""),
    ("db_now", "now()", "$1"),
];

/// `phrase` of the [`DIALECT`] as `backend` spells it, for a statement put together per call.
pub fn dialect(backend: Backend, phrase: &str) -> &'static str {
    let Some((_, postgres, sqlite)) = DIALECT.iter().find(|(name, _, _)| *name == phrase) else {
        panic!("{phrase} is not a phrase of DIALECT");
    };
    match backend {
        Backend::Postgres => postgres,
        Backend::Sqlite => sqlite,
    }
}

/// A row type both backends decode.
pub trait Row: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin {}
impl<T> Row for T where T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin {}

/// A backend's pool.
#[derive(Clone, Copy)]
pub enum Db<'a> {
    Postgres(&'a PgPool),
    Sqlite(&'a SqlitePool),
}

impl Db<'_> {
    pub fn backend(&self) -> Backend {
        match self {
            Self::Postgres(_) => Backend::Postgres,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }
}

/// A backend's transaction, opened by the backend (each opens a write its own way).
pub enum Tx {
    Postgres(sqlx::Transaction<'static, Postgres>),
    Sqlite(sqlx::Transaction<'static, Sqlite>),
}

impl Tx {
    pub fn backend(&self) -> Backend {
        match self {
            Self::Postgres(_) => Backend::Postgres,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }

    /// A PostgreSQL store's own transaction: a backend's statements run in the transactions it
    /// opened itself, so the other variant never reaches it.
    pub fn postgres(&mut self) -> &mut sqlx::Transaction<'static, Postgres> {
        match self {
            Self::Postgres(tx) => tx,
            Self::Sqlite(_) => unreachable!("a SQLite transaction given to the PostgreSQL store"),
        }
    }

    /// A SQLite store's own transaction (as [`Tx::postgres`]).
    pub fn sqlite(&mut self) -> &mut sqlx::Transaction<'static, Sqlite> {
        match self {
            Self::Sqlite(tx) => tx,
            Self::Postgres(_) => unreachable!("a PostgreSQL transaction given to the SQLite store"),
        }
    }

    pub async fn commit(self) -> StoreResult<()> {
        match self {
            Self::Postgres(tx) => tx.commit().await?,
            Self::Sqlite(tx) => tx.commit().await?,
        }
        Ok(())
    }
}

/// Where a query runs: a pool (a connection of its own), or the connection of an open
/// transaction (a [`Tx`], or a backend's own `sqlx::Transaction`).
pub enum On<'a> {
    Pool(Db<'a>),
    Postgres(&'a mut sqlx::PgConnection),
    Sqlite(&'a mut sqlx::SqliteConnection),
}

impl<'a> From<Db<'a>> for On<'a> {
    fn from(db: Db<'a>) -> Self {
        Self::Pool(db)
    }
}

impl<'a> From<&'a mut Tx> for On<'a> {
    fn from(tx: &'a mut Tx) -> Self {
        match tx {
            Tx::Postgres(tx) => Self::Postgres(tx),
            Tx::Sqlite(tx) => Self::Sqlite(tx),
        }
    }
}

impl<'a> From<&'a mut sqlx::Transaction<'_, Postgres>> for On<'a> {
    fn from(tx: &'a mut sqlx::Transaction<'_, Postgres>) -> Self {
        Self::Postgres(tx)
    }
}

impl<'a> From<&'a mut sqlx::Transaction<'_, Sqlite>> for On<'a> {
    fn from(tx: &'a mut sqlx::Transaction<'_, Sqlite>) -> Self {
        Self::Sqlite(tx)
    }
}

/// A transaction a helper runs several statements in: a [`Tx`], or a backend's own.
pub trait InTx: Send {
    fn on(&mut self) -> On<'_>;
}

impl InTx for Tx {
    fn on(&mut self) -> On<'_> {
        self.into()
    }
}

impl InTx for sqlx::Transaction<'_, Postgres> {
    fn on(&mut self) -> On<'_> {
        self.into()
    }
}

impl InTx for sqlx::Transaction<'_, Sqlite> {
    fn on(&mut self) -> On<'_> {
        self.into()
    }
}

/// A statement with its values, for either backend.
#[must_use = "a query does nothing until it is run"]
pub struct Query<'a> {
    sql: Sql<'a>,
    args: Vec<Arg>,
}

/// A query's text: one statement of the `.sql` files, or text made for the call (a list's
/// conditions) in the SQL both backends accept.
pub enum Sql<'a> {
    Named(Statement),
    Text(&'a str),
}

impl From<Statement> for Sql<'_> {
    fn from(statement: Statement) -> Self {
        Self::Named(statement)
    }
}

impl<'a> From<&'a str> for Sql<'a> {
    fn from(text: &'a str) -> Self {
        Self::Text(text)
    }
}

impl<'a> From<&'a String> for Sql<'a> {
    fn from(text: &'a String) -> Self {
        Self::Text(text)
    }
}

/// A query running `sql` (a [`Statement`], or text) on whichever backend it is given to.
pub fn query<'a>(sql: impl Into<Sql<'a>>) -> Query<'a> {
    Query { sql: sql.into(), args: Vec::new() }
}

impl<'a> Query<'a> {
    /// The next `$N`'s value.
    pub fn bind(mut self, value: impl Into<Arg>) -> Self {
        self.args.push(value.into());
        self
    }

    fn text(&self, backend: Backend) -> &str {
        match &self.sql {
            Sql::Named(statement) => statement.text(backend),
            Sql::Text(text) => text,
        }
    }

    /// Run it; the rows it changed.
    pub async fn execute(self, on: impl Into<On<'_>>) -> StoreResult<u64> {
        let on = on.into();
        let backend = on.backend();
        let sql = self.text(backend);
        Ok(match on {
            On::Pool(Db::Postgres(pool)) => pg(sqlx::query(sql), &self.args).execute(pool).await?.rows_affected(),
            On::Pool(Db::Sqlite(pool)) => lite(sqlx::query(sql), &self.args).execute(pool).await?.rows_affected(),
            On::Postgres(tx) => pg(sqlx::query(sql), &self.args).execute(tx).await?.rows_affected(),
            On::Sqlite(tx) => lite(sqlx::query(sql), &self.args).execute(tx).await?.rows_affected(),
        })
    }

    /// Every row it returns.
    pub async fn fetch_all<T: Row>(self, on: impl Into<On<'_>>) -> StoreResult<Vec<T>> {
        let on = on.into();
        let backend = on.backend();
        let sql = self.text(backend);
        Ok(match on {
            On::Pool(Db::Postgres(pool)) => pg_as(sqlx::query_as(sql), &self.args).fetch_all(pool).await?,
            On::Pool(Db::Sqlite(pool)) => lite_as(sqlx::query_as(sql), &self.args).fetch_all(pool).await?,
            On::Postgres(tx) => pg_as(sqlx::query_as(sql), &self.args).fetch_all(tx).await?,
            On::Sqlite(tx) => lite_as(sqlx::query_as(sql), &self.args).fetch_all(tx).await?,
        })
    }

    /// Its first row, if it returns any.
    pub async fn fetch_optional<T: Row>(self, on: impl Into<On<'_>>) -> StoreResult<Option<T>> {
        let on = on.into();
        let backend = on.backend();
        let sql = self.text(backend);
        Ok(match on {
            On::Pool(Db::Postgres(pool)) => pg_as(sqlx::query_as(sql), &self.args).fetch_optional(pool).await?,
            On::Pool(Db::Sqlite(pool)) => lite_as(sqlx::query_as(sql), &self.args).fetch_optional(pool).await?,
            On::Postgres(tx) => pg_as(sqlx::query_as(sql), &self.args).fetch_optional(tx).await?,
            On::Sqlite(tx) => lite_as(sqlx::query_as(sql), &self.args).fetch_optional(tx).await?,
        })
    }

    /// Its one row (an error when it returns none).
    pub async fn fetch_one<T: Row>(self, on: impl Into<On<'_>>) -> StoreResult<T> {
        self.fetch_optional(on).await?.ok_or(StoreError::Database(sqlx::Error::RowNotFound))
    }
}

impl On<'_> {
    pub fn backend(&self) -> Backend {
        match self {
            Self::Pool(db) => db.backend(),
            Self::Postgres(_) => Backend::Postgres,
            Self::Sqlite(_) => Backend::Sqlite,
        }
    }
}

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;
type PgQueryAs<'q, T> = sqlx::query::QueryAs<'q, Postgres, T, sqlx::postgres::PgArguments>;
type LiteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>;
type LiteQueryAs<'q, T> = sqlx::query::QueryAs<'q, Sqlite, T, sqlx::sqlite::SqliteArguments<'q>>;

fn pg<'q>(query: PgQuery<'q>, args: &'q [Arg]) -> PgQuery<'q> {
    args.iter().fold(query, |query, arg| arg.bind_postgres(query))
}

fn pg_as<'q, T>(query: PgQueryAs<'q, T>, args: &'q [Arg]) -> PgQueryAs<'q, T> {
    args.iter().fold(query, |query, arg| arg.bind_postgres_as(query))
}

fn lite<'q>(query: LiteQuery<'q>, args: &'q [Arg]) -> LiteQuery<'q> {
    args.iter().fold(query, |query, arg| arg.bind_sqlite(query))
}

fn lite_as<'q, T>(query: LiteQueryAs<'q, T>, args: &'q [Arg]) -> LiteQueryAs<'q, T> {
    args.iter().fold(query, |query, arg| arg.bind_sqlite_as(query))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_has_each_backends_phrases_and_no_placeholder_left() {
        assert!(statements::ALL.len() >= 89, "every file's statements are listed");
        for (name, statement) in statements::ALL {
            for backend in [Backend::Postgres, Backend::Sqlite] {
                let text = statement.text(backend);
                assert!(!text.contains("/*{") && !text.contains("--"), "{name}: {text}");
                assert!(!text.trim_end().ends_with(';'), "{name}: {text}");
            }
        }
        let mut phrases: Vec<&str> = DIALECT.iter().map(|(phrase, _, _)| *phrase).collect();
        phrases.sort_unstable();
        phrases.dedup();
        assert_eq!(phrases.len(), DIALECT.len(), "each phrase once");
        let locks = DIALECT.iter().filter(|(phrase, _, _)| phrase.starts_with("lock_"));
        assert!(
            locks.clone().count() == 3 && locks.clone().all(|(_, _, sqlite)| sqlite.is_empty()),
            "SQLite takes no row locks"
        );
    }
}
