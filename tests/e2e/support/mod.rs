//! The harness: a fresh database per test (a PostgreSQL database or a SQLite file), the real
//! `taskexec` binary started against it, and an HTTP client for its API.

pub mod db;
pub mod fixtures;
pub mod hostile;
pub mod otlp;
pub mod postgres;
pub mod receiver;
pub mod server;

pub use db::{Backend, TestDb};
pub use hostile::HostileReceiver;
pub use postgres::PrivatePostgres;
pub use receiver::Receiver;
pub use server::{Client, Server, ServerOptions};

/// Write one test per backend: `both_backends!(name);` expands to `name::postgres` and
/// `name::sqlite`, each calling `name(Backend::…)`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::support::Backend::Postgres).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
            }
        )+
    };
}

/// Wait for `condition` to hold, polling, or panic with `what` at the deadline.
pub async fn wait_for<F: FnMut() -> bool>(what: &str, timeout: std::time::Duration, mut condition: F) {
    let deadline = std::time::Instant::now() + timeout;
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Wait for an async condition to hold, polling, or panic with `what` at the deadline.
pub async fn eventually<F, Fut>(what: &str, timeout: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + timeout;
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}
