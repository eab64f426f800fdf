//! Setup documents: payload specs, configs and secrets, the named rows endpoints refer to.
//! None can be deleted while an endpoint refers to it. The statements are in
//! `sql/documents.sql`.

use async_trait::async_trait;
use serde_json::Value;

use super::sql::pages::{self, List};
use super::sql::references::delete_unless_referenced;
use super::sql::statements::documents as sql;
use super::sql::{query, Arg, SqlBackend};
use super::{now, Config, DbTime, Deleted, Inserted, PageRequest, PayloadSpec, Secret, StoreResult};

/// The setup documents' part of the store.
#[async_trait]
pub trait Documents: Send + Sync {
    async fn payload_spec_insert(&self, name: &str, schema: &Value) -> StoreResult<Inserted<PayloadSpec>>;
    async fn payload_spec_get(&self, name: &str) -> StoreResult<Option<PayloadSpec>>;
    /// A tenant's, by creation.
    async fn payload_spec_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<PayloadSpec>>;
    async fn payload_spec_update(&self, name: &str, schema: &Value) -> StoreResult<Option<PayloadSpec>>;
    /// Refused (InUse, with endpoint names) while an endpoint references it.
    async fn payload_spec_delete(&self, name: &str) -> StoreResult<Deleted>;

    async fn config_insert(&self, name: &str, values: &Value) -> StoreResult<Inserted<Config>>;
    async fn config_get(&self, name: &str) -> StoreResult<Option<Config>>;
    /// A tenant's, by creation.
    async fn config_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Config>>;
    async fn config_update(&self, name: &str, values: &Value) -> StoreResult<Option<Config>>;
    /// Refused (InUse, with endpoint names) while an endpoint references it.
    async fn config_delete(&self, name: &str) -> StoreResult<Deleted>;

    /// `allowed_hosts` is the JSON of `secret::hosts::AllowedHosts`; None: anywhere.
    async fn secret_insert(
        &self,
        name: &str,
        encrypted_value: &[u8],
        allowed_hosts: Option<&str>,
    ) -> StoreResult<Inserted<Secret>>;
    async fn secret_get(&self, name: &str) -> StoreResult<Option<Secret>>;
    /// A tenant's, by creation.
    async fn secret_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Secret>>;
    /// Which of `names` exist, for checking an endpoint's `{{secret.*}}` references.
    async fn secret_names_existing(&self, names: &[String]) -> StoreResult<Vec<String>>;
    /// `allowed_hosts`: None keeps the stored list, `Some(None)` clears it.
    async fn secret_update(
        &self,
        name: &str,
        encrypted_value: &[u8],
        allowed_hosts: Option<Option<&str>>,
    ) -> StoreResult<Option<Secret>>;
    /// Replace a ciphertext only if it is still `expected` (re-encryption under a new key must
    /// not overwrite a value rotated by a user meanwhile). Returns whether it was replaced.
    async fn secret_reencrypt(&self, name: &str, expected: &[u8], encrypted_value: &[u8]) -> StoreResult<bool>;
    /// Refused (InUse, with endpoint names) while an endpoint's templates name it.
    async fn secret_delete(&self, name: &str) -> StoreResult<Deleted>;
}

/// A list of one tenant's rows of one document table, by creation. `filter` holds the
/// tenant's filter (`tenant` is computed from each row's name: `domain::tenant`).
fn list<'a>(table: &'a str, columns: &'a str, filter: &'a [(&'a str, &'a str); 1]) -> List<'a> {
    List { columns, from: table, time_column: "created_at", key: "name", written: None, filters: filter, patterns: &[] }
}

#[async_trait]
impl<S: SqlBackend> Documents for S {
    async fn payload_spec_insert(&self, name: &str, schema: &Value) -> StoreResult<Inserted<PayloadSpec>> {
        let created = query(sql::PAYLOAD_SPEC_INSERT)
            .bind(name)
            .bind(Arg::json(schema))
            .bind(DbTime(now()))
            .fetch_optional(self.db())
            .await?;
        match created {
            Some(created) => Ok(Inserted::Created(created)),
            None => Inserted::existing(self.payload_spec_get(name).await?),
        }
    }

    async fn payload_spec_get(&self, name: &str) -> StoreResult<Option<PayloadSpec>> {
        query(sql::PAYLOAD_SPEC_GET).bind(name).fetch_optional(self.db()).await
    }

    async fn payload_spec_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<PayloadSpec>> {
        pages::page(
            self.db(),
            &list("payload_specs", "name, schema_json, created_at, updated_at", &[("tenant", tenant)]),
            page,
        )
        .await
    }

    async fn payload_spec_update(&self, name: &str, schema: &Value) -> StoreResult<Option<PayloadSpec>> {
        query(sql::PAYLOAD_SPEC_UPDATE)
            .bind(name)
            .bind(Arg::json(schema))
            .bind(DbTime(now()))
            .fetch_optional(self.db())
            .await
    }

    async fn payload_spec_delete(&self, name: &str) -> StoreResult<Deleted> {
        delete_unless_referenced(self, sql::PAYLOAD_SPEC_USERS, sql::PAYLOAD_SPEC_DELETE, name).await
    }

    async fn config_insert(&self, name: &str, values: &Value) -> StoreResult<Inserted<Config>> {
        let created = query(sql::CONFIG_INSERT)
            .bind(name)
            .bind(Arg::json(values))
            .bind(DbTime(now()))
            .fetch_optional(self.db())
            .await?;
        match created {
            Some(created) => Ok(Inserted::Created(created)),
            None => Inserted::existing(self.config_get(name).await?),
        }
    }

    async fn config_get(&self, name: &str) -> StoreResult<Option<Config>> {
        query(sql::CONFIG_GET).bind(name).fetch_optional(self.db()).await
    }

    async fn config_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Config>> {
        pages::page(
            self.db(),
            &list("configs", "name, values_json, created_at, updated_at", &[("tenant", tenant)]),
            page,
        )
        .await
    }

    async fn config_update(&self, name: &str, values: &Value) -> StoreResult<Option<Config>> {
        query(sql::CONFIG_UPDATE).bind(name).bind(Arg::json(values)).bind(DbTime(now())).fetch_optional(self.db()).await
    }

    async fn config_delete(&self, name: &str) -> StoreResult<Deleted> {
        delete_unless_referenced(self, sql::CONFIG_USERS, sql::CONFIG_DELETE, name).await
    }

    async fn secret_insert(
        &self,
        name: &str,
        encrypted_value: &[u8],
        allowed_hosts: Option<&str>,
    ) -> StoreResult<Inserted<Secret>> {
        let created = query(sql::SECRET_INSERT)
            .bind(name)
            .bind(encrypted_value)
            .bind(DbTime(now()))
            .bind(allowed_hosts)
            .fetch_optional(self.db())
            .await?;
        match created {
            Some(created) => Ok(Inserted::Created(created)),
            None => Inserted::existing(self.secret_get(name).await?),
        }
    }

    async fn secret_get(&self, name: &str) -> StoreResult<Option<Secret>> {
        query(sql::SECRET_GET).bind(name).fetch_optional(self.db()).await
    }

    async fn secret_list(&self, tenant: &str, page: &PageRequest) -> StoreResult<Vec<Secret>> {
        pages::page(
            self.db(),
            &list("secrets", "name, encrypted_value, allowed_hosts, created_at, updated_at", &[("tenant", tenant)]),
            page,
        )
        .await
    }

    async fn secret_names_existing(&self, names: &[String]) -> StoreResult<Vec<String>> {
        // An endpoint names a handful of secrets; one indexed lookup each keeps the SQL
        // portable (SQLite has no arrays to bind).
        let mut found = Vec::with_capacity(names.len());
        for name in names {
            let row: Option<(String,)> = query(sql::SECRET_EXISTS).bind(name).fetch_optional(self.db()).await?;
            found.extend(row.map(|(n,)| n));
        }
        Ok(found)
    }

    async fn secret_update(
        &self,
        name: &str,
        encrypted_value: &[u8],
        allowed_hosts: Option<Option<&str>>,
    ) -> StoreResult<Option<Secret>> {
        query(sql::SECRET_UPDATE)
            .bind(name)
            .bind(encrypted_value)
            .bind(DbTime(now()))
            .bind(allowed_hosts.is_some())
            .bind(allowed_hosts.flatten())
            .fetch_optional(self.db())
            .await
    }

    async fn secret_reencrypt(&self, name: &str, expected: &[u8], encrypted_value: &[u8]) -> StoreResult<bool> {
        let done =
            query(sql::SECRET_REENCRYPT).bind(name).bind(expected).bind(encrypted_value).execute(self.db()).await?;
        Ok(done == 1)
    }

    async fn secret_delete(&self, name: &str) -> StoreResult<Deleted> {
        delete_unless_referenced(self, sql::SECRET_USERS, sql::SECRET_DELETE, name).await
    }
}
