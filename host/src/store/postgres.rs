//! PostgreSQL (and CockroachDB) backend.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{Postgres, Transaction};

use super::common::impl_store;
use super::{Backend, StoreResult};

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub async fn connect(url: &str, pool_size: u32) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(Self { pool })
    }

    async fn begin_write(&self) -> StoreResult<Transaction<'_, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// CockroachDB speaks the PostgreSQL protocol but has no advisory locks, which sqlx's
    /// migrator takes by default to keep two starting servers from migrating at once.
    async fn is_cockroach(&self) -> StoreResult<bool> {
        let (version,): (String,) = sqlx::query_as("SELECT version()").fetch_one(&self.pool).await?;
        Ok(version.contains("CockroachDB"))
    }
}

impl_store!(PgStore, Postgres, {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> StoreResult<()> {
        let mut migrator = sqlx::migrate!("../migrations/postgres");
        if self.is_cockroach().await? {
            // Without the lock, two servers starting together may both try a migration; the
            // loser fails on the already-created tables and a restart finds nothing to do.
            migrator.set_locking(false);
        }
        migrator.run(&self.pool).await?;
        Ok(())
    }
});
