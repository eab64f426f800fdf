//! What can go wrong below the [`super::Store`] interface, and the retry of a write that met a
//! row moved out of the queue's partition.

use super::StoreResult;

/// What can go wrong below the [`Store`](super::Store) interface, classified so callers can
/// answer a user precisely. Database error kinds are matched explicitly in
/// [`StoreError::from_sqlx`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A row with the same key exists (a unique constraint fired).
    #[error("a row with this key already exists")]
    UniqueViolation,
    /// A referenced row does not exist, or a row is still referenced: a foreign key fired, or
    /// the store's own check where PostgreSQL has none (a job's endpoint, an execution's job;
    /// migration 0066).
    #[error("a foreign key constraint was violated")]
    ForeignKeyViolation,
    #[error("database error")]
    Database(#[source] sqlx::Error),
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A task that writes or reads for many callers together (`store::coalesce`, the worker's
    /// completer and lease keeper) ended before it answered: the service is shutting down.
    #[error("the store is closing: the service is shutting down")]
    Closed,
}

impl StoreError {
    pub fn from_sqlx(error: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &error {
            match db.kind() {
                sqlx::error::ErrorKind::UniqueViolation => return Self::UniqueViolation,
                sqlx::error::ErrorKind::ForeignKeyViolation => return Self::ForeignKeyViolation,
                // Not-null and check violations mean the service wrote a bad row: a bug, so they
                // stay database errors (an opaque 500 with the request id, logged in full).
                sqlx::error::ErrorKind::NotNullViolation
                | sqlx::error::ErrorKind::CheckViolation
                | sqlx::error::ErrorKind::Other => {}
                _ => {}
            }
        }
        Self::Database(error)
    }
}

impl StoreError {
    /// Whether the same write may succeed later unchanged: the database was unreachable,
    /// restarting, overloaded, or aborted the transaction (deadlock, serialization, SQLite's
    /// lock). False for errors about the data itself (a value the database refuses, a
    /// constraint), which fail the same way every time.
    pub fn is_transient(&self) -> bool {
        let error = match self {
            Self::Database(error) => error,
            // As a closed pool: a caller retrying it meets the shutdown that stops it.
            Self::Closed => return true,
            _ => return false,
        };
        match error {
            // Not Protocol: sqlx reports a statement it refuses to send (too many parameters)
            // that way, and it would fail the same way forever; the completer's split handles it.
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                let code = db.code();
                let code = code.as_deref().unwrap_or_default();
                match db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
                    // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
                    Some(_) => matches!(code.parse::<i32>().map(|c| c & 0xff), Ok(5 | 6)),
                    // PostgreSQL SQLSTATE classes: 08 connection exception, 40 transaction
                    // rollback, 53 insufficient resources, 57 operator intervention (a
                    // restart's admin_shutdown), 58 system error.
                    None => ["08", "40", "53", "57", "58"].iter().any(|class| code.starts_with(class)),
                }
            }
            _ => false,
        }
    }
}

impl StoreError {
    /// Whether the database aborted the statement as a serialization failure (SQLSTATE
    /// 40001): where history is partitioned, what a statement that waited for a row gets when
    /// the row's holder moved it out of the queue's partition (`store::partitions`).
    pub fn is_serialization_failure(&self) -> bool {
        matches!(self, Self::Database(sqlx::Error::Database(db)) if db.code().as_deref() == Some("40001"))
    }
}

/// Run `attempt` again, up to ten times in all, a millisecond more apart each time, while it
/// fails with a serialization failure.
/// On PostgreSQL a statement that meets a row another transaction has just finished (moved out
/// of `executions_live`) fails so rather than find the row gone (`store::partitions`): once
/// more, it no longer sees the row. For the writes that meet rows others finish: claims,
/// lease renewals, cancels, promotions, reclaims.
pub(crate) async fn retrying_moved<T, F, Fut>(mut attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = StoreResult<T>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(error) if error.is_serialization_failure() && tries < 10 => {
                tokio::time::sleep(std::time::Duration::from_millis(tries)).await;
                tries += 1;
            }
            done => return done,
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self::from_sqlx(error)
    }
}
