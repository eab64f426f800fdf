//! Installed plugins: their versions, their bytes, and removing a version no one uses.
//! The statements are in `sql/plugins.sql`.

use async_trait::async_trait;

use super::sql::pages::{self, List};
use super::sql::references::{delete_unless_referenced, IN_USE_SHOWN};
use super::sql::statements::plugins as sql;
use super::sql::{query, Arg, SqlBackend};
use super::{now, DbTime, Deleted, PageRequest, PluginRecord, PluginWrite, StoreResult};

/// The plugin registry's part of the store.
#[async_trait]
pub trait Plugins: Send + Sync {
    /// Install a plugin version: the next version number under its name.
    async fn plugin_insert(&self, plugin: &PluginWrite) -> StoreResult<PluginRecord>;
    async fn plugin_latest(&self, name: &str) -> StoreResult<Option<PluginRecord>>;
    async fn plugin_versions(&self, name: &str) -> StoreResult<Vec<PluginRecord>>;
    async fn plugin_bytes(&self, name: &str, version: i32) -> StoreResult<Option<Vec<u8>>>;
    /// The newest version of each plugin, a page at a time.
    async fn plugin_list(&self, page: &PageRequest) -> StoreResult<Vec<PluginRecord>>;
    /// Every version; refused (InUse, with endpoint names) while an endpoint uses it.
    async fn plugin_delete(&self, name: &str) -> StoreResult<Deleted>;
    /// One version; refused (InUse, with endpoint names) while an endpoint is pinned to it, or,
    /// when it is the plugin's last version, while any endpoint uses the plugin.
    async fn plugin_version_delete(&self, name: &str, version: i32) -> StoreResult<Deleted>;
}

#[async_trait]
impl<S: SqlBackend> Plugins for S {
    async fn plugin_insert(&self, plugin: &PluginWrite) -> StoreResult<PluginRecord> {
        let mut tx = self.write().await?;
        let (next,): (i64,) = query(sql::PLUGIN_NEXT_VERSION).bind(&plugin.name).fetch_one(&mut tx).await?;
        let record = query(sql::PLUGIN_INSERT)
            .bind(&plugin.name)
            .bind(i32::try_from(next).unwrap_or(i32::MAX))
            .bind(&plugin.sha256)
            .bind(&plugin.bytes)
            .bind(&plugin.world)
            .bind(Arg::json(&plugin.grants))
            .bind(Arg::json(&plugin.limits))
            .bind(DbTime(now()))
            .fetch_one(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(record)
    }

    async fn plugin_latest(&self, name: &str) -> StoreResult<Option<PluginRecord>> {
        query(sql::PLUGIN_LATEST).bind(name).fetch_optional(self.db()).await
    }

    async fn plugin_versions(&self, name: &str) -> StoreResult<Vec<PluginRecord>> {
        query(sql::PLUGIN_VERSIONS).bind(name).fetch_all(self.db()).await
    }

    async fn plugin_bytes(&self, name: &str, version: i32) -> StoreResult<Option<Vec<u8>>> {
        let row: Option<(Vec<u8>,)> =
            query(sql::PLUGIN_BYTES).bind(name).bind(version).fetch_optional(self.db()).await?;
        Ok(row.map(|(bytes,)| bytes))
    }

    async fn plugin_list(&self, page: &PageRequest) -> StoreResult<Vec<PluginRecord>> {
        // The newest version of each name, paged like any table.
        let list = List {
            columns: "name, version, sha256, world, grants, limits, created_at, size_bytes",
            from: "(SELECT name, version, sha256, world, grants, limits, created_at,
                           CAST(length(bytes) AS BIGINT) AS size_bytes
                    FROM plugins p
                    WHERE version = (SELECT MAX(version) FROM plugins WHERE name = p.name)) AS latest",
            time_column: "created_at",
            key: "name",
            written: None,
            filters: &[],
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn plugin_delete(&self, name: &str) -> StoreResult<Deleted> {
        delete_unless_referenced(self, sql::PLUGIN_USERS, sql::PLUGIN_DELETE, name).await
    }

    async fn plugin_version_delete(&self, name: &str, version: i32) -> StoreResult<Deleted> {
        let mut tx = self.write().await?;
        let versions: Vec<(i32,)> = query(sql::PLUGIN_VERSION_NUMBERS).bind(name).fetch_all(&mut tx).await?;
        if !versions.iter().any(|(v,)| *v == version) {
            return Ok(Deleted::NotFound);
        }
        let users: Vec<(String,)> = query(sql::PLUGIN_VERSION_USERS)
            .bind(name)
            .bind(version)
            .bind(versions.len() == 1)
            .bind(IN_USE_SHOWN)
            .fetch_all(&mut tx)
            .await?;
        if !users.is_empty() {
            return Ok(Deleted::InUse(users.into_iter().map(|(n,)| n).collect()));
        }
        query(sql::PLUGIN_VERSION_DELETE).bind(name).bind(version).execute(&mut tx).await?;
        tx.commit().await?;
        Ok(Deleted::Deleted)
    }
}
