//! Test databases: a new PostgreSQL database per test (dropped afterwards), or a SQLite file in
//! a temporary directory.

use std::path::PathBuf;

use sqlx::Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// The server to create test databases on; `TE_TEST_POSTGRES_URL` overrides it.
pub fn admin_url() -> String {
    std::env::var("TE_TEST_POSTGRES_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

pub struct TestDb {
    pub backend: Backend,
    /// What the server gets as TE_DATABASE_URL.
    pub url: String,
    pg_name: Option<String>,
    /// The server the PostgreSQL database was created on (to drop it).
    admin: String,
    /// Holds the SQLite file (and its key file) for as long as the test runs.
    pub dir: tempfile::TempDir,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let path: PathBuf = dir.path().join("taskexec.db");
                Self { backend, url: format!("sqlite:{}", path.display()), pg_name: None, admin: String::new(), dir }
            }
            Backend::Postgres => Self::postgres_on(&admin_url()).await,
        }
    }

    /// A new database on the PostgreSQL server at `admin` (a server of the test's own).
    pub async fn postgres_on(admin: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let name = format!("te_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(admin)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin} (run scripts/test, which starts it): {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await.expect("CREATE DATABASE");
        let url = replace_database(admin, &name);
        Self { backend: Backend::Postgres, url, pg_name: Some(name), admin: admin.to_owned(), dir }
    }

    /// The database through the pooler `TE_TEST_PGBOUNCER_URL` names, if one does (PostgreSQL).
    pub fn pooled_url(&self) -> Option<String> {
        let pooler = std::env::var("TE_TEST_PGBOUNCER_URL").ok().filter(|u| !u.is_empty())?;
        Some(replace_database(&pooler, self.pg_name.as_deref()?))
    }

    /// A direct connection, for tests that check what is stored (ciphertexts) or set up rows
    /// whose API does not exist yet.
    pub async fn execute(&self, sql: &str) {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// One integer a query returns (a count, say).
    pub async fn scalar(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
            }
        }
    }

    /// The text column a query returns, one per row (NULLs left out): stored outputs, errors
    /// and log lines, to check what reached the database (`CAST(x AS TEXT)` reads JSON on both
    /// backends).
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        let rows: Vec<Option<String>> = match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
        };
        rows.into_iter().flatten().collect()
    }

    /// The stored ciphertext of a secret.
    pub async fn secret_ciphertext(&self, name: &str) -> Vec<u8> {
        let sql = "SELECT encrypted_value FROM secrets WHERE name = $1";
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).bind(name).fetch_one(&mut conn).await.unwrap()
            }
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_scalar(sql).bind(name).fetch_one(&mut conn).await.unwrap()
            }
        }
    }
}

fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let base = base.rsplit_once('/').map_or(base, |(prefix, _)| prefix);
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(name) = self.pg_name.take() else { return };
        let admin = std::mem::take(&mut self.admin);
        // Drop runs outside async context; a short-lived thread with its own runtime does it.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ =
                        sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await;
                }
            })
        })
        .join();
    }
}
