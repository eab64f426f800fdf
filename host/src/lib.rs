//! # Task Executor (`taskexec`)
//!
//! `setTimeout` and `setInterval` as a service: users register delivery endpoints, then create
//! jobs that fire now, later, or on a cron schedule. See `README.md` and `docs/` for the
//! product; this page is the map of the code.
//!
//! # Layout
//!
//! - [`api`]: the REST API, one module per resource, each with its `router()`.
//! - [`store`]: the one `Store` interface and its PostgreSQL and SQLite backends.
//! - [`secret`]: encryption of secret values at rest, and the keys behind it.
//! - [`template`]: `{{input.*}}` / `{{config.*}}` / `{{secret.*}}` templates in endpoint specs.
//! - [`transport`]: delivery targets (HTTP, Kafka, Redis Streams): their endpoint specs.
//! - [`retry`]: an endpoint's retry policy.
//! - [`config`]: flags and `TE_*` environment variables.
//! - [`error`]: the API's error type and its response shape.
//! - [`cli`]: the `taskexec` command line (`serve`, `migrate`, `secrets rotate`).

pub mod api;
pub mod cli;
pub mod config;
pub mod error;
pub mod retry;
pub mod secret;
pub mod store;
pub mod template;
pub mod transport;
