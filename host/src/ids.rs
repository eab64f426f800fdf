//! Ids: opaque strings with a type prefix (`job_…`, `exec_…`, `att_…`, `log_…`), so an id in a
//! log line or a support ticket says what it names, and a newtype per kind, so a job id cannot
//! be passed where an execution id is meant.
//!
//! An id read from a request path or the database is taken as it is written (`From<String>`):
//! an id of the wrong shape is simply one that names nothing, and the API answers 404.
//!
//! A new id's 32 hex digits are a UUIDv7: its first twelve are the millisecond it was made, so
//! ids sort in the order they were made (strictly, within one process). Every id is a key of a
//! B-tree index, and a row is usually read and rewritten soon after the rows made just before
//! it: a claim takes the oldest due executions, their results follow, their attempts and log
//! lines are keyed by them. With random ids each of those rows lands on a leaf page of its own
//! in every id index; after each checkpoint the first change to a page writes the whole page to
//! the WAL, and a claim of 100 executions dirtied ~200 pages and wrote ~1 MiB of WAL. With ids
//! in time order the same claim touches a handful of pages (docs/benchmarks.md, "Ids in time
//! order"). The other 74 bits are random (a counter seeded at random each millisecond, then
//! random bits), so ids made at once by several processes do not collide.
//!
//! CockroachDB is the exception: it splits a table into ranges by key, and keys that grow with
//! time send every insert to the last range, one node's. On it ids stay random
//! ([`spread_keys`], called when the store finds it is connected to CockroachDB).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether new ids are random (UUIDv4) rather than in time order; see the module's note.
static RANDOM_IDS: AtomicBool = AtomicBool::new(false);

/// Make new ids random from now on: for a database that spreads keys across nodes by their
/// value (CockroachDB), where ids in time order would all be written to one range.
pub fn spread_keys() {
    RANDOM_IDS.store(true, Ordering::Relaxed);
}

/// The 32 hex digits of a new id.
fn new_digits() -> uuid::fmt::Simple {
    let uuid = if RANDOM_IDS.load(Ordering::Relaxed) { uuid::Uuid::new_v4() } else { uuid::Uuid::now_v7() };
    uuid.simple()
}

/// A prefixed id type: made with `new()`, shown and stored as its text, serde-transparent, and
/// a sqlx `Type`/`Encode`/`Decode` wherever text is (PostgreSQL arrays included).
macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        #[serde(transparent)]
        #[schema(value_type = String)]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A new id with this kind's prefix, later in order than any made before it by
            /// this process (see the module's note).
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(format!("{}_{}", $prefix, $crate::ids::new_digits()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $name
        where
            String: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <String as sqlx::Encode<'q, DB>>::encode_by_ref(&self.0, buf)
            }
        }

        /// Any text is an id (one of the wrong shape names nothing).
        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;

            fn from_str(id: &str) -> Result<Self, Self::Err> {
                Ok(Self(id.to_owned()))
            }
        }

        $crate::domain::sql_text_type!($name);
    };
}

id_type!(
    /// A job (`job_…`).
    JobId,
    "job"
);
id_type!(
    /// One fire of a job (`exec_…`).
    ExecutionId,
    "exec"
);
id_type!(
    /// One attempt at an execution (`att_…`).
    AttemptId,
    "att"
);
id_type!(
    /// One log line of an attempt (`log_…`).
    LogId,
    "log"
);

id_type!(
    /// An API key issued to a tenant (`key_…`): its name in listings, audit records and
    /// revocation. The key itself is shown once, when made.
    ApiKeyId,
    "key"
);

id_type!(
    /// One request's audit record (`aud_…`).
    AuditId,
    "aud"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_read_as_text() {
        let job = JobId::new();
        assert!(job.starts_with("job_") && job.len() == 4 + 32, "{job}");
        assert!(ExecutionId::new().starts_with("exec_"));
        assert_eq!(serde_json::to_value(&job).unwrap(), serde_json::json!(job.as_str()));
        let back: JobId = serde_json::from_value(serde_json::json!(job.as_str())).unwrap();
        assert_eq!(back, job);
        assert_ne!(JobId::new(), JobId::new());
    }

    #[test]
    fn ids_sort_in_the_order_they_were_made() {
        let made: Vec<ExecutionId> = (0..10_000).map(|_| ExecutionId::new()).collect();
        assert!(made.windows(2).all(|pair| pair[0] < pair[1]), "ids out of order");
        // The first twelve digits are the millisecond: an id made now starts with now.
        let millis = u64::from_str_radix(&made[0]["exec_".len()..][..12], 16).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(now.abs_diff(millis) < 60_000, "{} is not stamped with the time it was made", made[0]);
    }
}
