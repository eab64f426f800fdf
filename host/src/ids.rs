//! Ids: opaque strings with a type prefix (`job_…`, `exec_…`, `att_…`, `log_…`), so an id in a
//! log line or a support ticket says what it names, and a newtype per kind, so a job id cannot
//! be passed where an execution id is meant.
//!
//! An id read from a request path or the database is taken as it is written (`From<String>`):
//! an id of the wrong shape is simply one that names nothing, and the API answers 404.

use std::fmt;

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

            /// A new, random id with this kind's prefix.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(format!("{}_{}", $prefix, uuid::Uuid::new_v4().simple()))
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
}
