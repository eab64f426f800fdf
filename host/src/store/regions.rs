//! Regions: heartbeats per process component, and which regions are alive (written and read,
//! not yet acted on). The statements are in `sql/regions.sql`.

use async_trait::async_trait;
use serde_json::Value;

use super::sql::statements::regions as sql;
use super::sql::{query, Arg, SqlBackend};
use super::{now, DbTime, StoreResult};

/// The regions' part of the store.
#[async_trait]
pub trait Regions: Send + Sync {
    async fn heartbeat_write(&self, region: &str, component: &str, status: &str, metadata: &Value) -> StoreResult<()>;
    /// Regions marked alive in region_status.
    async fn region_alive(&self) -> StoreResult<Vec<String>>;
}

#[async_trait]
impl<S: SqlBackend> Regions for S {
    async fn heartbeat_write(&self, region: &str, component: &str, status: &str, metadata: &Value) -> StoreResult<()> {
        query(sql::HEARTBEAT_WRITE)
            .bind(region)
            .bind(component)
            .bind(DbTime(now()))
            .bind(status)
            .bind(Arg::json(metadata))
            .execute(self.db())
            .await?;
        Ok(())
    }

    async fn region_alive(&self) -> StoreResult<Vec<String>> {
        let rows: Vec<(String,)> = query(sql::REGIONS_ALIVE).fetch_all(self.db()).await?;
        Ok(rows.into_iter().map(|(region,)| region).collect())
    }
}
