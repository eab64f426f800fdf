//! Concurrency keys' admissions (`flow::concurrency`): a keyed execution is made PENDING and
//! becomes QUEUED when its key has room. The looks for keys to admit are in `sql/keys.sql`;
//! the admission is each backend's: PostgreSQL takes each key's advisory lock
//! (`sql/postgres.sql`, KeysLock), so that two admissions of one key — a worker's after a
//! result, the API's after a create, the promoter's — never both see its last free place, and
//! admits many keys in one statement (KeysAdmit); SQLite, one writer in process, a key at a
//! time (`sql/sqlite.sql`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::sql::statements::keys as sql;
use super::sql::statements::postgres as pg;
use super::sql::statements::sqlite as lite;
use super::sql::{query, Arg, SqlBackend};
use super::{retrying_moved, Backend, DbTime, ExecutionWrite, StoreResult};

/// The most keys one admission's transaction locks: PostgreSQL's lock table is shared by
/// every session (`max_locks_per_transaction` × connections, 6,400 at the defaults).
const KEYS_PER_TRANSACTION: usize = 200;

/// One concurrency key of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, sqlx::FromRow)]
pub struct KeyRef {
    pub endpoint: String,
    pub key: String,
}

impl KeyRef {
    /// The keys of these executions (the keyed ones), each once.
    pub fn of_writes<'a>(writes: impl IntoIterator<Item = &'a ExecutionWrite>) -> Vec<KeyRef> {
        Self::each_once(writes.into_iter().filter_map(|w| {
            w.concurrency_key.as_ref().map(|key| KeyRef { endpoint: w.endpoint.clone(), key: key.clone() })
        }))
    }

    pub fn each_once(keys: impl IntoIterator<Item = KeyRef>) -> Vec<KeyRef> {
        let mut keys: Vec<KeyRef> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// After executions were written: admit what their keys have room for (due now, or within
/// [`super::READY_AHEAD`], as the promoter would).
pub(super) async fn admit_written<'a>(
    store: &impl Keys,
    writes: impl IntoIterator<Item = &'a ExecutionWrite>,
) -> StoreResult<()> {
    let keys = KeyRef::of_writes(writes);
    if !keys.is_empty() {
        store.keys_admit(&keys, super::now() + super::READY_AHEAD).await?;
    }
    Ok(())
}

/// The admissions' part of the store.
#[async_trait]
pub trait Keys: Send + Sync {
    /// Admit what each of `keys` has room for among its executions due by `until` (oldest
    /// first); the others due are marked waiting. How many became QUEUED.
    async fn keys_admit(&self, keys: &[KeyRef], until: DateTime<Utc>) -> StoreResult<u64>;
    /// Keys with executions due by `until` that no admission has looked at yet.
    async fn keys_unjudged(&self, until: DateTime<Utc>, limit: i64) -> StoreResult<Vec<KeyRef>>;
    /// Keys with executions waiting and room for one (their place freed by a cancel, a lost
    /// lease or a delete, which admit nothing themselves).
    async fn keys_starved(&self, limit: i64) -> StoreResult<Vec<KeyRef>>;
}

#[async_trait]
impl<S: SqlBackend> Keys for S {
    async fn keys_admit(&self, keys: &[KeyRef], until: DateTime<Utc>) -> StoreResult<u64> {
        let mut admitted = 0;
        for chunk in keys.chunks(KEYS_PER_TRANSACTION) {
            admitted += retrying_moved(|| async {
                let mut tx = self.write().await?;
                let admitted = match tx.backend() {
                    Backend::Postgres => {
                        let pairs = Value::Array(
                            chunk
                                .iter()
                                .map(|k| Value::Array(vec![k.endpoint.clone().into(), k.key.clone().into()]))
                                .collect(),
                        );
                        query(pg::KEYS_LOCK).bind(Arg::json(&pairs)).execute(&mut tx).await?;
                        let (admitted, _marked): (i64, i64) = query(pg::KEYS_ADMIT)
                            .bind(Arg::json(&pairs))
                            .bind(DbTime(until))
                            .fetch_one(&mut tx)
                            .await?;
                        u64::try_from(admitted).unwrap_or(0)
                    }
                    // One writer at a time, in process: a few statements a key cost little.
                    Backend::Sqlite => {
                        let mut admitted = 0;
                        for k in chunk {
                            let room = query(lite::KEY_ROOM).bind(&k.endpoint).bind(&k.key).bind(DbTime(until));
                            let (room,): (Option<i64>,) = room.fetch_one(&mut tx).await?;
                            if let Some(room @ 1..) = room {
                                let lets_in = query(lite::KEY_ADMIT).bind(&k.endpoint).bind(&k.key).bind(DbTime(until));
                                admitted += lets_in.bind(room).execute(&mut tx).await?;
                            }
                            let marks = query(lite::KEY_MARK).bind(&k.endpoint).bind(&k.key).bind(DbTime(until));
                            marks.execute(&mut tx).await?;
                        }
                        admitted
                    }
                };
                tx.commit().await?;
                Ok(admitted)
            })
            .await?;
        }
        Ok(admitted)
    }

    async fn keys_unjudged(&self, until: DateTime<Utc>, limit: i64) -> StoreResult<Vec<KeyRef>> {
        query(sql::KEYS_UNJUDGED).bind(DbTime(until)).bind(limit).fetch_all(self.db()).await
    }

    async fn keys_starved(&self, limit: i64) -> StoreResult<Vec<KeyRef>> {
        query(sql::KEYS_STARVED).bind(limit).fetch_all(self.db()).await
    }
}
