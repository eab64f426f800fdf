//! Deleting a row that other rows may still name.

use super::{query, Sql, SqlBackend, Tx};
use crate::store::{Deleted, StoreError, StoreResult};

/// How many referencing rows a refused delete names.
pub const IN_USE_SHOWN: i64 = 20;

/// Delete the row keyed `key` with `delete` (its one `$1`), unless `referencing` (`$1` the key,
/// `$2` [`IN_USE_SHOWN`], one text column) finds rows that still point at it: then
/// `InUse` names them. The foreign keys hold the line against a reference created between the
/// check and the delete.
pub async fn delete_unless_referenced<'a>(
    store: &impl SqlBackend,
    referencing: impl Into<Sql<'a>> + Send,
    delete: impl Into<Sql<'a>> + Send,
    key: &str,
) -> StoreResult<Deleted> {
    let mut tx = store.write().await?;
    let users: Vec<(String,)> = query(referencing).bind(key).bind(IN_USE_SHOWN).fetch_all(&mut tx).await?;
    if !users.is_empty() {
        return Ok(Deleted::InUse(users.into_iter().map(|(u,)| u).collect()));
    }
    let deleted = query(delete).bind(key).execute(&mut tx).await;
    settle(tx, deleted).await
}

/// A delete's outcome, `deleted` the rows it deleted: committed when it deleted the row; not
/// found when there was none; in use (naming nothing) when a foreign key refused it, a
/// reference made after the checks.
pub async fn settle(tx: Tx, deleted: StoreResult<u64>) -> StoreResult<Deleted> {
    match deleted {
        Ok(0) => Ok(Deleted::NotFound),
        Ok(_) => {
            tx.commit().await?;
            Ok(Deleted::Deleted)
        }
        Err(StoreError::ForeignKeyViolation) => Ok(Deleted::InUse(Vec::new())),
        Err(other) => Err(other),
    }
}
