//! The queries PostgreSQL and SQLite both accept, written once.
//!
//! `impl_store!(Type, Database, { backend's own methods })` expands into the backend's whole
//! `Store` impl: its own methods plus every method below. Each backend type must have a `pool`
//! field and an inherent `begin_write()` that opens a transaction that will write (SQLite needs
//! `BEGIN IMMEDIATE` there; a deferred read-then-write transaction can fail under WAL instead of
//! waiting for the lock).
//!
//! All SQL here sticks to the portable subset: `$N` placeholders (sqlx's SQLite driver reads
//! them as positions), `ON CONFLICT … DO NOTHING`, `RETURNING`, and row-value comparison.

macro_rules! impl_store {
    ($store:ty, $db:ty, { $($own:tt)* }) => {
        // An anonymous scope so the imports below serve the expansion without leaking into
        // (or depending on) the backend module that invokes the macro.
        const _: () = {
            use serde_json::Value;
            use sqlx::types::Json;
            use $crate::store::{
                now, Config, DbTime, Deleted, Endpoint, EndpointWrite, Inserted, PageRequest, PayloadSpec,
                Secret, StoreError, StoreResult,
            };

            const PAYLOAD_SPEC_COLUMNS: &str = "name, schema_json, created_at, updated_at";
            const CONFIG_COLUMNS: &str = "name, values_json, created_at, updated_at";
            const SECRET_COLUMNS: &str = "name, encrypted_value, created_at, updated_at";
            const ENDPOINT_COLUMNS: &str =
                "name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at";
            /// How many referencing rows a refused delete names.
            const IN_USE_SHOWN: i64 = 20;

            impl $store {
                /// One page of `table` in (created_at, key) order, strictly after the cursor.
                async fn list_page<T>(&self, columns: &str, table: &str, key: &str, page: &PageRequest) -> StoreResult<Vec<T>>
                where
                    T: for<'r> sqlx::FromRow<'r, <$db as sqlx::Database>::Row> + Send + Unpin,
                {
                    Ok(match &page.after {
                        None => {
                            let sql = format!("SELECT {columns} FROM {table} ORDER BY created_at, {key} LIMIT $1");
                            sqlx::query_as::<$db, T>(&sql).bind(page.limit).fetch_all(&self.pool).await?
                        }
                        Some(after) => {
                            // Row-value comparison: everything after the last row shown, so rows
                            // inserted meanwhile never shift a page (they sort after `now`).
                            let sql = format!(
                                "SELECT {columns} FROM {table}
                                 WHERE (created_at, {key}) > ($1, $2)
                                 ORDER BY created_at, {key}
                                 LIMIT $3"
                            );
                            sqlx::query_as::<$db, T>(&sql)
                                .bind(DbTime(after.created_at))
                                .bind(&after.key)
                                .bind(page.limit)
                                .fetch_all(&self.pool)
                                .await?
                        }
                    })
                }

                /// Delete one row unless `referencing_sql` (one `$1`, one text column) finds
                /// rows that still point at it. The foreign keys hold the line against a
                /// reference created between the check and the delete.
                async fn delete_unless_referenced(&self, referencing_sql: &str, delete_sql: &str, key: &str) -> StoreResult<Deleted> {
                    let mut tx = self.begin_write().await?;
                    let users: Vec<(String,)> = sqlx::query_as(referencing_sql)
                        .bind(key)
                        .bind(IN_USE_SHOWN)
                        .fetch_all(&mut *tx)
                        .await?;
                    if !users.is_empty() {
                        return Ok(Deleted::InUse(users.into_iter().map(|(u,)| u).collect()));
                    }
                    match sqlx::query(delete_sql).bind(key).execute(&mut *tx).await.map_err(StoreError::from) {
                        Ok(done) if done.rows_affected() == 0 => Ok(Deleted::NotFound),
                        Ok(_) => {
                            tx.commit().await?;
                            Ok(Deleted::Deleted)
                        }
                        Err(StoreError::ForeignKeyViolation) => Ok(Deleted::InUse(Vec::new())),
                        Err(other) => Err(other),
                    }
                }

                /// Insert a row of a "named JSON document" table (payload specs, configs): the
                /// new row, or None when the name is taken.
                async fn document_insert<T>(&self, table: &str, json_column: &str, columns: &str, name: &str, document: &Value) -> StoreResult<Option<T>>
                where
                    T: for<'r> sqlx::FromRow<'r, <$db as sqlx::Database>::Row> + Send + Unpin,
                {
                    let sql = format!(
                        "INSERT INTO {table} (name, {json_column}, created_at, updated_at)
                         VALUES ($1, $2, $3, $3)
                         ON CONFLICT (name) DO NOTHING
                         RETURNING {columns}"
                    );
                    Ok(sqlx::query_as::<$db, T>(&sql)
                        .bind(name)
                        .bind(Json(document))
                        .bind(DbTime(now()))
                        .fetch_optional(&self.pool)
                        .await?)
                }

                /// Replace the document of a named row; None when there is no such row.
                async fn document_update<T>(&self, table: &str, json_column: &str, columns: &str, name: &str, document: &Value) -> StoreResult<Option<T>>
                where
                    T: for<'r> sqlx::FromRow<'r, <$db as sqlx::Database>::Row> + Send + Unpin,
                {
                    let sql = format!(
                        "UPDATE {table} SET {json_column} = $2, updated_at = $3 WHERE name = $1
                         RETURNING {columns}"
                    );
                    Ok(sqlx::query_as::<$db, T>(&sql)
                        .bind(name)
                        .bind(Json(document))
                        .bind(DbTime(now()))
                        .fetch_optional(&self.pool)
                        .await?)
                }

                async fn endpoint_secret_refs_write(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    endpoint: &str,
                    secrets: &[String],
                ) -> StoreResult<()> {
                    sqlx::query("DELETE FROM endpoint_secret_refs WHERE endpoint = $1")
                        .bind(endpoint)
                        .execute(&mut **tx)
                        .await?;
                    for secret in secrets {
                        sqlx::query("INSERT INTO endpoint_secret_refs (endpoint, secret) VALUES ($1, $2)")
                            .bind(endpoint)
                            .bind(secret)
                            .execute(&mut **tx)
                            .await?;
                    }
                    Ok(())
                }
            }

            fn existing<T>(row: Option<T>) -> StoreResult<Inserted<T>> {
                // The conflicting row was deleted between the insert and this read: report
                // the conflict rather than pretend the insert happened.
                row.map(Inserted::Existing).ok_or(StoreError::UniqueViolation)
            }

            #[async_trait::async_trait]
            impl $crate::store::Store for $store {
                $($own)*

                async fn ping(&self) -> StoreResult<()> {
                    sqlx::query("SELECT 1").execute(&self.pool).await?;
                    Ok(())
                }

                // ---- payload specs ----

                async fn payload_spec_insert(&self, name: &str, schema: &Value) -> StoreResult<Inserted<PayloadSpec>> {
                    match self.document_insert("payload_specs", "schema_json", PAYLOAD_SPEC_COLUMNS, name, schema).await? {
                        Some(created) => Ok(Inserted::Created(created)),
                        None => existing(self.payload_spec_get(name).await?),
                    }
                }

                async fn payload_spec_get(&self, name: &str) -> StoreResult<Option<PayloadSpec>> {
                    let sql = format!("SELECT {PAYLOAD_SPEC_COLUMNS} FROM payload_specs WHERE name = $1");
                    Ok(sqlx::query_as::<$db, PayloadSpec>(&sql).bind(name).fetch_optional(&self.pool).await?)
                }

                async fn payload_spec_list(&self, page: &PageRequest) -> StoreResult<Vec<PayloadSpec>> {
                    self.list_page(PAYLOAD_SPEC_COLUMNS, "payload_specs", "name", page).await
                }

                async fn payload_spec_update(&self, name: &str, schema: &Value) -> StoreResult<Option<PayloadSpec>> {
                    self.document_update("payload_specs", "schema_json", PAYLOAD_SPEC_COLUMNS, name, schema).await
                }

                async fn payload_spec_delete(&self, name: &str) -> StoreResult<Deleted> {
                    self.delete_unless_referenced(
                        "SELECT name FROM endpoints WHERE payload_spec_ref = $1 ORDER BY name LIMIT $2",
                        "DELETE FROM payload_specs WHERE name = $1",
                        name,
                    )
                    .await
                }

                // ---- configs ----

                async fn config_insert(&self, name: &str, values: &Value) -> StoreResult<Inserted<Config>> {
                    match self.document_insert("configs", "values_json", CONFIG_COLUMNS, name, values).await? {
                        Some(created) => Ok(Inserted::Created(created)),
                        None => existing(self.config_get(name).await?),
                    }
                }

                async fn config_get(&self, name: &str) -> StoreResult<Option<Config>> {
                    let sql = format!("SELECT {CONFIG_COLUMNS} FROM configs WHERE name = $1");
                    Ok(sqlx::query_as::<$db, Config>(&sql).bind(name).fetch_optional(&self.pool).await?)
                }

                async fn config_list(&self, page: &PageRequest) -> StoreResult<Vec<Config>> {
                    self.list_page(CONFIG_COLUMNS, "configs", "name", page).await
                }

                async fn config_update(&self, name: &str, values: &Value) -> StoreResult<Option<Config>> {
                    self.document_update("configs", "values_json", CONFIG_COLUMNS, name, values).await
                }

                async fn config_delete(&self, name: &str) -> StoreResult<Deleted> {
                    self.delete_unless_referenced(
                        "SELECT name FROM endpoints WHERE config_ref = $1 ORDER BY name LIMIT $2",
                        "DELETE FROM configs WHERE name = $1",
                        name,
                    )
                    .await
                }

                // ---- secrets ----

                async fn secret_insert(&self, name: &str, encrypted_value: &[u8]) -> StoreResult<Inserted<Secret>> {
                    let sql = format!(
                        "INSERT INTO secrets (name, encrypted_value, created_at, updated_at)
                         VALUES ($1, $2, $3, $3)
                         ON CONFLICT (name) DO NOTHING
                         RETURNING {SECRET_COLUMNS}"
                    );
                    let row = sqlx::query_as::<$db, Secret>(&sql)
                        .bind(name)
                        .bind(encrypted_value)
                        .bind(DbTime(now()))
                        .fetch_optional(&self.pool)
                        .await?;
                    match row {
                        Some(created) => Ok(Inserted::Created(created)),
                        None => existing(self.secret_get(name).await?),
                    }
                }

                async fn secret_get(&self, name: &str) -> StoreResult<Option<Secret>> {
                    let sql = format!("SELECT {SECRET_COLUMNS} FROM secrets WHERE name = $1");
                    Ok(sqlx::query_as::<$db, Secret>(&sql).bind(name).fetch_optional(&self.pool).await?)
                }

                async fn secret_list(&self, page: &PageRequest) -> StoreResult<Vec<Secret>> {
                    self.list_page(SECRET_COLUMNS, "secrets", "name", page).await
                }

                async fn secret_names_existing(&self, names: &[String]) -> StoreResult<Vec<String>> {
                    // An endpoint names a handful of secrets; one indexed lookup each keeps the
                    // SQL portable (SQLite has no arrays to bind).
                    let mut found = Vec::with_capacity(names.len());
                    for name in names {
                        let row: Option<(String,)> = sqlx::query_as("SELECT name FROM secrets WHERE name = $1")
                            .bind(name)
                            .fetch_optional(&self.pool)
                            .await?;
                        found.extend(row.map(|(n,)| n));
                    }
                    Ok(found)
                }

                async fn secret_update(&self, name: &str, encrypted_value: &[u8]) -> StoreResult<Option<Secret>> {
                    let sql = format!(
                        "UPDATE secrets SET encrypted_value = $2, updated_at = $3 WHERE name = $1
                         RETURNING {SECRET_COLUMNS}"
                    );
                    Ok(sqlx::query_as::<$db, Secret>(&sql)
                        .bind(name)
                        .bind(encrypted_value)
                        .bind(DbTime(now()))
                        .fetch_optional(&self.pool)
                        .await?)
                }

                async fn secret_reencrypt(&self, name: &str, expected: &[u8], encrypted_value: &[u8]) -> StoreResult<bool> {
                    // updated_at stays: the value did not change, only the key it is sealed under.
                    let done = sqlx::query("UPDATE secrets SET encrypted_value = $3 WHERE name = $1 AND encrypted_value = $2")
                        .bind(name)
                        .bind(expected)
                        .bind(encrypted_value)
                        .execute(&self.pool)
                        .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn secret_delete(&self, name: &str) -> StoreResult<Deleted> {
                    self.delete_unless_referenced(
                        "SELECT endpoint FROM endpoint_secret_refs WHERE secret = $1 ORDER BY endpoint LIMIT $2",
                        "DELETE FROM secrets WHERE name = $1",
                        name,
                    )
                    .await
                }

                // ---- endpoints ----

                async fn endpoint_insert(&self, endpoint: &EndpointWrite) -> StoreResult<Inserted<Endpoint>> {
                    let sql = format!(
                        "INSERT INTO endpoints
                             (name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at)
                         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7)
                         ON CONFLICT (name) DO NOTHING
                         RETURNING {ENDPOINT_COLUMNS}"
                    );
                    let mut tx = self.begin_write().await?;
                    let created = sqlx::query_as::<$db, Endpoint>(&sql)
                        .bind(&endpoint.name)
                        .bind(&endpoint.endpoint_type)
                        .bind(&endpoint.payload_spec)
                        .bind(&endpoint.config)
                        .bind(Json(&endpoint.spec))
                        .bind(Json(&endpoint.retry_policy))
                        .bind(DbTime(now()))
                        .fetch_optional(&mut *tx)
                        .await?;
                    let Some(created) = created else {
                        drop(tx);
                        return existing(self.endpoint_get(&endpoint.name).await?);
                    };
                    Self::endpoint_secret_refs_write(&mut tx, &endpoint.name, &endpoint.secret_refs).await?;
                    tx.commit().await?;
                    Ok(Inserted::Created(created))
                }

                async fn endpoint_get(&self, name: &str) -> StoreResult<Option<Endpoint>> {
                    let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE name = $1");
                    Ok(sqlx::query_as::<$db, Endpoint>(&sql).bind(name).fetch_optional(&self.pool).await?)
                }

                async fn endpoint_list(&self, page: &PageRequest) -> StoreResult<Vec<Endpoint>> {
                    self.list_page(ENDPOINT_COLUMNS, "endpoints", "name", page).await
                }

                async fn endpoint_update(&self, endpoint: &EndpointWrite) -> StoreResult<Option<Endpoint>> {
                    let sql = format!(
                        "UPDATE endpoints
                         SET endpoint_type = $2, payload_spec_ref = $3, config_ref = $4, spec = $5,
                             retry_policy = $6, version = version + 1, updated_at = $7
                         WHERE name = $1
                         RETURNING {ENDPOINT_COLUMNS}"
                    );
                    let mut tx = self.begin_write().await?;
                    let updated = sqlx::query_as::<$db, Endpoint>(&sql)
                        .bind(&endpoint.name)
                        .bind(&endpoint.endpoint_type)
                        .bind(&endpoint.payload_spec)
                        .bind(&endpoint.config)
                        .bind(Json(&endpoint.spec))
                        .bind(Json(&endpoint.retry_policy))
                        .bind(DbTime(now()))
                        .fetch_optional(&mut *tx)
                        .await?;
                    let Some(updated) = updated else { return Ok(None) };
                    Self::endpoint_secret_refs_write(&mut tx, &endpoint.name, &endpoint.secret_refs).await?;
                    tx.commit().await?;
                    Ok(Some(updated))
                }

                async fn endpoint_delete(&self, name: &str) -> StoreResult<Deleted> {
                    // Any job, even a retired one, keeps its endpoint (its history points at
                    // it); active jobs are named first because they are the ones to cancel.
                    self.delete_unless_referenced(
                        "SELECT job_id FROM jobs WHERE endpoint = $1
                         ORDER BY CASE status WHEN 'ACTIVE' THEN 0 ELSE 1 END, created_at DESC
                         LIMIT $2",
                        "DELETE FROM endpoints WHERE name = $1",
                        name,
                    )
                    .await
                }

                // ---- API keys ----

                async fn api_key_hashes(&self) -> StoreResult<Vec<Vec<u8>>> {
                    let rows: Vec<(Vec<u8>,)> = sqlx::query_as("SELECT key_hash FROM api_keys ORDER BY created_at")
                        .fetch_all(&self.pool)
                        .await?;
                    Ok(rows.into_iter().map(|(h,)| h).collect())
                }

                async fn api_key_insert(&self, key_hash: &[u8]) -> StoreResult<()> {
                    sqlx::query("INSERT INTO api_keys (key_hash, created_at) VALUES ($1, $2)")
                        .bind(key_hash)
                        .bind(DbTime(now()))
                        .execute(&self.pool)
                        .await?;
                    Ok(())
                }
            }
        };
    };
}

pub(crate) use impl_store;
