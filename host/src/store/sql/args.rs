//! A query's values, as either database takes them.

use serde_json::Value;
use sqlx::types::Json;
use sqlx::{Database, Encode, Postgres, Sqlite, Type};

use super::{LiteQuery, LiteQueryAs, PgQuery, PgQueryAs};
use crate::store::DbTime;

/// One `$N` value. Each variant is one SQL type, `None` its NULL.
#[derive(Debug, Clone)]
pub enum Arg {
    Text(Option<String>),
    Int(Option<i32>),
    BigInt(Option<i64>),
    Float(Option<f64>),
    Bool(Option<bool>),
    Time(Option<DbTime>),
    /// JSON: `jsonb` on PostgreSQL, text on SQLite.
    Json(Option<Value>),
    Bytes(Option<Vec<u8>>),
}

impl Arg {
    /// A JSON document.
    pub fn json(value: &Value) -> Self {
        Self::Json(Some(value.clone()))
    }

    /// A value stored as its JSON (NULL for None).
    pub fn json_of<T: serde::Serialize>(value: Option<&T>) -> Self {
        Self::Json(value.map(|v| serde_json::to_value(v).expect("a stored value serializes to JSON")))
    }

    pub(super) fn bind_postgres<'q>(&'q self, query: PgQuery<'q>) -> PgQuery<'q> {
        bind(self, query)
    }

    pub(super) fn bind_postgres_as<'q, T>(&'q self, query: PgQueryAs<'q, T>) -> PgQueryAs<'q, T> {
        bind(self, query)
    }

    pub(super) fn bind_sqlite<'q>(&'q self, query: LiteQuery<'q>) -> LiteQuery<'q> {
        bind(self, query)
    }

    pub(super) fn bind_sqlite_as<'q, T>(&'q self, query: LiteQueryAs<'q, T>) -> LiteQueryAs<'q, T> {
        bind(self, query)
    }
}

/// What sqlx's `Query` and `QueryAs` have in common: a value bound as the next parameter.
trait Binds<'q, DB: Database>: Sized {
    fn add<T: 'q + Encode<'q, DB> + Type<DB>>(self, value: T) -> Self;
}

impl<'q> Binds<'q, Postgres> for PgQuery<'q> {
    fn add<T: 'q + Encode<'q, Postgres> + Type<Postgres>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, R> Binds<'q, Postgres> for PgQueryAs<'q, R> {
    fn add<T: 'q + Encode<'q, Postgres> + Type<Postgres>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q> Binds<'q, Sqlite> for LiteQuery<'q> {
    fn add<T: 'q + Encode<'q, Sqlite> + Type<Sqlite>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, R> Binds<'q, Sqlite> for LiteQueryAs<'q, R> {
    fn add<T: 'q + Encode<'q, Sqlite> + Type<Sqlite>>(self, value: T) -> Self {
        self.bind(value)
    }
}

fn bind<'q, DB, Q>(arg: &'q Arg, query: Q) -> Q
where
    DB: Database,
    Q: Binds<'q, DB>,
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i32>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    Option<f64>: Encode<'q, DB> + Type<DB>,
    Option<bool>: Encode<'q, DB> + Type<DB>,
    Option<DbTime>: Encode<'q, DB> + Type<DB>,
    Option<Json<&'q Value>>: Encode<'q, DB> + Type<DB>,
    Option<&'q [u8]>: Encode<'q, DB> + Type<DB>,
{
    match arg {
        Arg::Text(v) => query.add(v.as_deref()),
        Arg::Int(v) => query.add(*v),
        Arg::BigInt(v) => query.add(*v),
        Arg::Float(v) => query.add(*v),
        Arg::Bool(v) => query.add(*v),
        Arg::Time(v) => query.add(*v),
        Arg::Json(v) => query.add(v.as_ref().map(Json)),
        Arg::Bytes(v) => query.add(v.as_deref()),
    }
}

impl From<&str> for Arg {
    fn from(value: &str) -> Self {
        Self::Text(Some(value.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(value: String) -> Self {
        Self::Text(Some(value))
    }
}

impl From<&String> for Arg {
    fn from(value: &String) -> Self {
        Self::Text(Some(value.clone()))
    }
}

impl From<Option<&str>> for Arg {
    fn from(value: Option<&str>) -> Self {
        Self::Text(value.map(str::to_owned))
    }
}

impl From<Option<String>> for Arg {
    fn from(value: Option<String>) -> Self {
        Self::Text(value)
    }
}

impl From<&Option<String>> for Arg {
    fn from(value: &Option<String>) -> Self {
        Self::Text(value.clone())
    }
}

impl From<i32> for Arg {
    fn from(value: i32) -> Self {
        Self::Int(Some(value))
    }
}

impl From<Option<i32>> for Arg {
    fn from(value: Option<i32>) -> Self {
        Self::Int(value)
    }
}

impl From<i64> for Arg {
    fn from(value: i64) -> Self {
        Self::BigInt(Some(value))
    }
}

impl From<Option<i64>> for Arg {
    fn from(value: Option<i64>) -> Self {
        Self::BigInt(value)
    }
}

impl From<f64> for Arg {
    fn from(value: f64) -> Self {
        Self::Float(Some(value))
    }
}

impl From<Option<f64>> for Arg {
    fn from(value: Option<f64>) -> Self {
        Self::Float(value)
    }
}

impl From<bool> for Arg {
    fn from(value: bool) -> Self {
        Self::Bool(Some(value))
    }
}

impl From<DbTime> for Arg {
    fn from(value: DbTime) -> Self {
        Self::Time(Some(value))
    }
}

impl From<Option<DbTime>> for Arg {
    fn from(value: Option<DbTime>) -> Self {
        Self::Time(value)
    }
}

impl From<&[u8]> for Arg {
    fn from(value: &[u8]) -> Self {
        Self::Bytes(Some(value.to_vec()))
    }
}

impl From<Vec<u8>> for Arg {
    fn from(value: Vec<u8>) -> Self {
        Self::Bytes(Some(value))
    }
}

impl From<&Vec<u8>> for Arg {
    fn from(value: &Vec<u8>) -> Self {
        Self::Bytes(Some(value.clone()))
    }
}

/// The domain's words (`text_enum!`), stored as their text; None is NULL.
macro_rules! text_args {
    ($($word:ident),* $(,)?) => {$(
        impl From<crate::domain::$word> for Arg {
            fn from(value: crate::domain::$word) -> Self {
                Self::Text(Some(value.as_str().to_owned()))
            }
        }

        impl From<Option<crate::domain::$word>> for Arg {
            fn from(value: Option<crate::domain::$word>) -> Self {
                Self::Text(value.map(|v| v.as_str().to_owned()))
            }
        }
    )*};
}

text_args!(
    AttemptStatus,
    CatchupPolicy,
    EndpointType,
    ExecutionStatus,
    JobStatus,
    KeyRole,
    OverlapPolicy,
    Trigger,
    TriggerReason
);

/// Ids (`crate::ids`), stored as their text.
macro_rules! id_args {
    ($($id:ident),* $(,)?) => {$(
        impl From<&crate::ids::$id> for Arg {
            fn from(value: &crate::ids::$id) -> Self {
                Self::Text(Some(value.as_str().to_owned()))
            }
        }

        impl From<Option<&crate::ids::$id>> for Arg {
            fn from(value: Option<&crate::ids::$id>) -> Self {
                Self::Text(value.map(|id| id.as_str().to_owned()))
            }
        }
    )*};
}

id_args!(ApiKeyId, AttemptId, AuditId, ExecutionId, JobId, LogId);
