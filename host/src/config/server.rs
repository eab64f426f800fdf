//! The HTTP server's bounds on its clients: how long a request may take to arrive and to be
//! answered, and how many connections the server and each client address may hold.

use std::time::Duration;

use clap::Args;

use crate::api::server::ServerLimits;

#[derive(Debug, Args)]
#[command(next_help_heading = "HTTP server")]
pub struct ServerArgs {
    /// Seconds a client may take to send a request's head before its connection is closed
    /// (against clients that drip their request to hold a connection).
    #[arg(long, env = "TE_HEADER_READ_TIMEOUT_SEC", value_name = "TE_HEADER_READ_TIMEOUT_SEC", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub header_read_timeout_sec: u64,

    /// Seconds a client may take to send a request's whole body; later, the request is answered
    /// 408 REQUEST_TIMEOUT and its connection closed. One deadline for the whole body, so a
    /// client dripping a byte at a time cannot stretch it.
    #[arg(long, env = "TE_BODY_READ_TIMEOUT_SEC", value_name = "TE_BODY_READ_TIMEOUT_SEC", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_read_timeout_sec: u64,

    /// Seconds a request may take until its answer begins (its body included); later, it is
    /// answered 408 REQUEST_TIMEOUT. A stream of events (`/jobs/{id}/events`) is not cut: its
    /// answer begins at once.
    #[arg(long, env = "TE_REQUEST_TIMEOUT_SEC", value_name = "TE_REQUEST_TIMEOUT_SEC", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout_sec: u64,

    /// Connections the API (or health) server serves at once; more wait in the listen backlog.
    #[arg(long, env = "TE_MAX_CONNECTIONS", value_name = "TE_MAX_CONNECTIONS", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,

    /// Connections one client address may hold at once; more are closed as they arrive. Behind
    /// a reverse proxy every client has the proxy's address: raise it to TE_MAX_CONNECTIONS there.
    #[arg(long, env = "TE_MAX_CONNECTIONS_PER_CLIENT", value_name = "TE_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_client: u64,

    /// Failed authentications (a wrong API key, to the API or the dashboard's sign-in) one
    /// client address may make in a minute; past it, every request of that address that needs
    /// a key is answered 429 RATE_LIMITED until the minute is over. 0 turns this off.
    #[arg(long, env = "TE_AUTH_FAILURES_PER_MINUTE", value_name = "TE_AUTH_FAILURES_PER_MINUTE",
          default_value_t = crate::api::auth::DEFAULT_AUTH_FAILURES_PER_MINUTE)]
    pub auth_failures_per_minute: u32,

    /// Seconds a dashboard session lasts from signing in; signing out ends it sooner.
    #[arg(long, env = "TE_UI_SESSION_TTL_SEC", value_name = "TE_UI_SESSION_TTL_SEC", default_value_t = 43_200,
          value_parser = clap::value_parser!(u64).range(60..=2_592_000))]
    pub ui_session_ttl_sec: u64,
}

impl ServerArgs {
    pub fn ui_session_ttl(&self) -> Duration {
        Duration::from_secs(self.ui_session_ttl_sec)
    }

    pub fn limits(&self) -> ServerLimits {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        ServerLimits {
            header_read_timeout: Duration::from_secs(self.header_read_timeout_sec),
            body_read_timeout: Duration::from_secs(self.body_read_timeout_sec),
            request_timeout: Duration::from_secs(self.request_timeout_sec),
            max_connections: count(self.max_connections),
            max_connections_per_client: count(self.max_connections_per_client),
        }
    }
}
