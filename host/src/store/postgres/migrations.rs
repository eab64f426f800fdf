//! The PostgreSQL store's migrations' own machinery: the lock that serialises them across
//! processes (PostgreSQL and CockroachDB alike), and the checksums of migrations rewritten
//! after release.

use std::time::Duration;

use sqlx::PgPool;

use super::super::StoreResult;

/// Serialises migrations across processes that start together, on PostgreSQL and CockroachDB
/// alike: whoever holds the one row of `te_migration_lock` migrates, the others wait for it
/// and then find nothing to do. A holder that dies leaves a row that expires (after
/// `MigrationLock::TTL`) rather than blocking start-up for ever.
pub(super) struct MigrationLock {
    holder: String,
}

impl MigrationLock {
    const TTL_SECONDS: i64 = 600;
    const WAIT: Duration = Duration::from_millis(250);

    pub(super) async fn acquire(pool: &PgPool) -> StoreResult<Self> {
        let create = "CREATE TABLE IF NOT EXISTS te_migration_lock (
                          id          INT          NOT NULL PRIMARY KEY,
                          holder      TEXT         NOT NULL,
                          expires_at  TIMESTAMPTZ  NOT NULL
                      )";
        // Two first starts may race to create the table; PostgreSQL then refuses the loser's
        // CREATE (a unique violation in its catalog) even with IF NOT EXISTS. Once more finds
        // the table there.
        if sqlx::query(create).execute(pool).await.is_err() {
            sqlx::query(create).execute(pool).await?;
        }
        let holder = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple());
        let mut waited = false;
        loop {
            let taken: Option<(String,)> = sqlx::query_as(
                "INSERT INTO te_migration_lock (id, holder, expires_at)
                 VALUES (1, $1, now() + $2 * INTERVAL '1 second')
                 ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                 WHERE te_migration_lock.expires_at < now()
                 RETURNING holder",
            )
            .bind(&holder)
            .bind(Self::TTL_SECONDS)
            .fetch_optional(pool)
            .await?;
            if taken.is_some() {
                return Ok(Self { holder });
            }
            if !waited {
                tracing::info!("Another process is applying migrations; waiting for it.");
                waited = true;
            }
            tokio::time::sleep(Self::WAIT).await;
        }
    }

    pub(super) async fn release(self, pool: &PgPool) -> StoreResult<()> {
        sqlx::query("DELETE FROM te_migration_lock WHERE id = 1 AND holder = $1")
            .bind(&self.holder)
            .execute(pool)
            .await?;
        Ok(())
    }
}

/// Migrations whose text was rewritten after release, without changing what they do, and the
/// checksum of the text they were released with: (version, sha384 of the released file).
/// - 0005 (rewritten 2026-11-23) as one schema change per transaction, each step safe to
///   repeat, for CockroachDB; released in 0.1.0 as one transaction.
const REWRITTEN_MIGRATIONS: [(i64, &str); 1] =
    [(5, "8a518a6ce78db9d223f8a173e68f8a25262f243b14989701ea24820ed0a1ead85391ab9429eecea1ca1d059d669929af")];

/// A database that applied a rewritten migration's released text is given the new text's
/// checksum, so the migrator accepts it (it refuses any applied migration whose text changed).
pub(super) async fn accept_rewritten_migrations(pool: &PgPool, migrator: &sqlx::migrate::Migrator) -> StoreResult<()> {
    let (exists,): (bool,) =
        sqlx::query_as("SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_name = '_sqlx_migrations')")
            .fetch_one(pool)
            .await?;
    if !exists {
        return Ok(());
    }
    for (version, released) in REWRITTEN_MIGRATIONS {
        let Some(current) = migrator.iter().find(|m| m.version == version) else { continue };
        let released = decode_hex(released);
        let updated = sqlx::query("UPDATE _sqlx_migrations SET checksum = $1 WHERE version = $2 AND checksum = $3")
            .bind(current.checksum.as_ref())
            .bind(version)
            .bind(&released)
            .execute(pool)
            .await?;
        if updated.rows_affected() > 0 {
            tracing::info!(version, "Migration rewritten since this database applied it; its checksum was updated.");
        }
    }
    Ok(())
}

fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("a hex checksum")).collect()
}
