//! Configuration: command-line flags, each backed by a `TE_*` environment variable with the
//! name and default docs/operations.md lists (`TE_WORKER_MAX_CONCURRENT`'s default says why it
//! is what it is). The client commands' arguments are in `config/commands.rs`.
//! `taskexec --help` and `taskexec serve --help` list them all. A bad value stops start-up
//! with a message naming the variable (each value is named after its variable, so clap's
//! error quotes it).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod commands;
mod database;
mod limits;
mod server;
pub use commands::*;
pub use limits::{InputLimitArgs, QuotaArgs};
pub use server::ServerArgs;

#[derive(Debug, Parser)]
#[command(
    name = "taskexec",
    version,
    about = "Task Executor: setTimeout and setInterval as a service.",
    long_about = "Task Executor: setTimeout and setInterval as a service.\n\n\
        Register delivery endpoints (HTTP, Kafka, Redis Streams), then create jobs that fire now, \
        later, or on a cron schedule. Every flag can also be set by the environment variable \
        shown beside it."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: the REST API, the scheduler and the worker (TE_ROLES picks which).
    Serve(Box<ServeArgs>),
    /// Apply pending database migrations and exit.
    Migrate(MigrateArgs),
    /// Secrets (talks to the REST API at TE_URL), and their encryption (`rotate`).
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// Install and manage WebAssembly plugins (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Delivery endpoints (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Endpoints(EndpointsCommand),
    /// Configs: named values endpoints read as {{config.*}} (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Configs(ResourceCommand),
    /// Payload specs: JSON Schemas for jobs' input (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Specs(ResourceCommand),
    /// Jobs: create, list, follow and cancel them (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Executions: one fire of a job, its attempts and logs (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Executions(ExecutionsCommand),
    /// Tenants (talks to the REST API at TE_URL).
    #[command(subcommand)]
    Tenants(TenantsCommand),
    /// API keys issued to a tenant with a role: admin, write or read (talks to the REST API at
    /// TE_URL).
    #[command(subcommand, name = "api-keys")]
    ApiKeys(ApiKeysCommand),
    /// Print a shell completion script: `taskexec completions bash > ~/.local/share/bash-completion/completions/taskexec`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct DatabaseArgs {
    /// Where the data lives: postgres://… (PostgreSQL or CockroachDB), or sqlite:PATH. Unset
    /// means embedded SQLite in ./taskexec.db.
    #[arg(long, env = "TE_DATABASE_URL", value_name = "TE_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Database connections per process. Unset: 20, or 8 in a PostgreSQL process that only runs
    /// the worker or the scheduler (see `DatabaseArgs::pool_size`).
    #[arg(long, env = "TE_DB_POOL_SIZE", value_name = "TE_DB_POOL_SIZE",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub db_pool_size: Option<u32>,

    /// PostgreSQL only: how the worker's claims and attempt results are committed. `deferred`
    /// (the default) does not wait for each commit's WAL flush: a PostgreSQL crash can forget
    /// the last fraction of a second of them, and those executions are delivered again (at
    /// least once holds; nothing is lost). `durable` waits for every flush. What the API
    /// writes is durable either way.
    #[arg(long, env = "TE_DB_WORKER_COMMITS", value_name = "TE_DB_WORKER_COMMITS", value_enum,
          default_value_t = crate::store::WorkerCommits::Deferred)]
    pub db_worker_commits: crate::store::WorkerCommits,

    /// PostgreSQL only: where LISTEN connects, for the wake-ups between processes (new work,
    /// plugin changes). A transaction-mode pooler (PgBouncer) cannot carry LISTEN: when
    /// TE_DATABASE_URL goes through one, set this to PostgreSQL itself; `off` polls instead.
    /// Unset: TE_DATABASE_URL.
    #[arg(long, env = "TE_DATABASE_LISTEN_URL", value_name = "TE_DATABASE_LISTEN_URL", hide_env_values = true)]
    pub db_listen_url: Option<String>,
}

impl DatabaseArgs {
    /// Where LISTEN connects (`TE_DATABASE_LISTEN_URL`).
    pub fn listen_via(&self) -> crate::store::ListenVia {
        match self.db_listen_url.as_deref().map(str::trim) {
            None | Some("") => crate::store::ListenVia::Pool,
            Some("off") => crate::store::ListenVia::Off,
            Some(url) => crate::store::ListenVia::Url(url.to_owned()),
        }
    }

    /// Connections of a PostgreSQL process without the API role: its claims, two result
    /// writers, the lease keeper, the scheduler and the reclaimer at once, with room to spare.
    /// More only spread the same statements over more PostgreSQL backends, each planning them
    /// and faulting in the shared buffers they touch on its own (sqlx hands idle connections
    /// out in turn): a worker drained 40,000 jobs at 11,549/s with 20, 12,834/s with 6 or 8
    /// (docs/benchmarks.md, "Side by side with graphile-worker").
    pub const BACKGROUND_POOL_SIZE: u32 = 8;
    /// Connections otherwise: a process serving the API takes requests from many clients at
    /// once, and SQLite has no backends to spread over (its drain measured no gain from 8).
    pub const POOL_SIZE: u32 = 20;

    /// `TE_DB_POOL_SIZE`, or the default for a process on `location` that does (`api`) or does
    /// not serve the API.
    pub fn pool_size(&self, location: &crate::store::DatabaseLocation, api: bool) -> u32 {
        let background = matches!(location, crate::store::DatabaseLocation::Postgres(_)) && !api;
        self.db_pool_size.unwrap_or(if background { Self::BACKGROUND_POOL_SIZE } else { Self::POOL_SIZE })
    }
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The key secrets are encrypted under: 32 random bytes, standard base64 (`openssl rand
    /// -base64 32`). Required with PostgreSQL; in embedded mode, when unset, a key is generated
    /// into a 0600 file beside the database.
    #[arg(long, env = "TE_SECRET_ENCRYPTION_KEY", value_name = "TE_SECRET_ENCRYPTION_KEY", hide_env_values = true)]
    pub secret_encryption_key: Option<String>,

    /// Earlier keys, comma-separated, still accepted for reading during a key rotation.
    #[arg(
        long,
        env = "TE_SECRET_ENCRYPTION_KEY_PREVIOUS",
        value_name = "TE_SECRET_ENCRYPTION_KEY_PREVIOUS",
        hide_env_values = true
    )]
    pub secret_encryption_key_previous: Option<String>,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Log filter, in tracing's EnvFilter syntax (`info`, `taskexec=debug`, …).
    #[arg(long, env = "TE_LOG", value_name = "TE_LOG", default_value = "info")]
    pub log: String,

    /// Log line format.
    #[arg(long, env = "TE_LOG_FORMAT", value_name = "TE_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Api,
    Scheduler,
    Worker,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Debug, Args)]
pub struct RotateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub log: LogArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub log: LogArgs,

    /// Address the REST API listens on.
    #[arg(long, env = "TE_LISTEN_ADDR", value_name = "TE_LISTEN_ADDR", default_value = "0.0.0.0:8080")]
    pub listen_addr: SocketAddr,

    /// Which roles this process runs, comma-separated.
    #[arg(
        long,
        env = "TE_ROLES",
        value_name = "TE_ROLES",
        value_delimiter = ',',
        default_value = "api,scheduler,worker"
    )]
    pub roles: Vec<Role>,

    /// API keys accepted as `Authorization: Bearer <key>`, comma-separated, each at least 16
    /// characters. Unset in embedded mode: a key is generated at first start and printed once.
    #[arg(long, env = "TE_API_KEYS", value_name = "TE_API_KEYS", hide_env_values = true)]
    pub api_keys: Option<String>,

    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub input_limits: InputLimitArgs,
    #[command(flatten)]
    pub quotas: QuotaArgs,

    /// Requests per second each API key may make (a token bucket); 0 (the default) is no limit.
    /// Over it, the API answers 429 RATE_LIMITED with Retry-After. /healthz, /readyz and
    /// /metrics are never limited.
    #[arg(long, env = "TE_API_RATE_LIMIT", value_name = "TE_API_RATE_LIMIT", default_value_t = 0)]
    pub api_rate_limit: u32,

    /// How many requests a key may make at once before TE_API_RATE_LIMIT paces it (the bucket's
    /// size); 0 (the default) is twice TE_API_RATE_LIMIT.
    #[arg(long, env = "TE_API_RATE_BURST", value_name = "TE_API_RATE_BURST", default_value_t = 0)]
    pub api_rate_burst: u32,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "TE_MAX_BODY_BYTES", value_name = "TE_MAX_BODY_BYTES", default_value_t = 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024))]
    pub max_body_bytes: u64,

    /// How far ahead a DELAYED job's run_at may be, in days.
    #[arg(long, env = "TE_MAX_SCHEDULE_AHEAD_DAYS", value_name = "TE_MAX_SCHEDULE_AHEAD_DAYS", default_value_t = 365,
          value_parser = clap::value_parser!(u32).range(1..=36_500))]
    pub max_schedule_ahead_days: u32,

    /// Do not apply migrations at start (run `taskexec migrate` separately).
    #[arg(long, env = "TE_NO_MIGRATE", value_name = "TE_NO_MIGRATE")]
    pub no_migrate: bool,

    /// Addresses deliveries may always reach, comma-separated CIDRs: exceptions to
    /// TE_EGRESS_DENY and to the built-in refusals (loopback, 0.0.0.0/8, link-local and cloud
    /// metadata addresses). 127.0.0.0/8,::1/128 lets deliveries reach this machine.
    #[arg(long, env = "TE_EGRESS_ALLOW", value_name = "TE_EGRESS_ALLOW")]
    pub egress_allow: Option<String>,

    /// Addresses deliveries may not reach, comma-separated CIDRs, checked on the address
    /// connected to (e.g. 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7 in a
    /// shared deployment). Applies to every transport (HTTP, Redis Streams, Kafka bootstrap
    /// servers and advertised brokers) and to plugins.
    #[arg(long, env = "TE_EGRESS_DENY", value_name = "TE_EGRESS_DENY")]
    pub egress_deny: Option<String>,

    /// Address for `/healthz`, `/readyz` and `/metrics` alone, for processes without the API
    /// role (a worker or scheduler fleet). With the API role they are on TE_LISTEN_ADDR as well.
    #[arg(long, env = "TE_HEALTH_ADDR", value_name = "TE_HEALTH_ADDR")]
    pub health_addr: Option<SocketAddr>,

    #[command(flatten)]
    pub worker: WorkerArgs,
    #[command(flatten)]
    pub scheduler: SchedulerArgs,
    #[command(flatten)]
    pub plugins: PluginRuntimeArgs,
}

/// The plugin runtime's settings.
#[derive(Debug, Args)]
#[command(next_help_heading = "Plugins")]
pub struct PluginRuntimeArgs {
    /// Largest plugin upload, in bytes.
    #[arg(long, env = "TE_PLUGIN_MAX_BYTES", value_name = "TE_PLUGIN_MAX_BYTES", default_value_t = 32 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=512 * 1024 * 1024))]
    pub plugin_max_bytes: u64,
    /// The most linear memory any plugin may be given, in MiB (each gets 64 unless installed with more).
    #[arg(long, env = "TE_PLUGIN_MEMORY_MB_MAX", value_name = "TE_PLUGIN_MEMORY_MB_MAX", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub plugin_memory_mb_max: u32,
    /// The linear memory all plugin instances of this process may use together, in MiB: each
    /// instance holds its plugin's memory limit of it while it lives, and calls wait for room
    /// (`taskexec_plugin_memory_wait_seconds`). Default: a quarter of the machine's memory.
    #[arg(long, env = "TE_PLUGIN_MEMORY_TOTAL_MB", value_name = "TE_PLUGIN_MEMORY_TOTAL_MB",
          value_parser = clap::value_parser!(u32).range(16..))]
    pub plugin_memory_total_mb: Option<u32>,
    /// Where compiled plugins are cached (by sha256 and engine), so a restart does not recompile.
    /// Default: `plugin-cache` beside the SQLite database, or in the working directory.
    #[arg(long, env = "TE_PLUGIN_CACHE_DIR", value_name = "TE_PLUGIN_CACHE_DIR")]
    pub plugin_cache_dir: Option<std::path::PathBuf>,
}

/// The worker role's settings (used by the worker; validated and listed here already).
#[derive(Debug, Args)]
#[command(next_help_heading = "Worker")]
pub struct WorkerArgs {
    /// Deliveries one worker process makes at once (a slot is held while a request is out, not
    /// while its result is written). 200 by default: to a receiver answering in a millisecond,
    /// a 2-core worker drained about 5,000 jobs a second with 50 slots and 7,000 with 200.
    #[arg(long, env = "TE_WORKER_MAX_CONCURRENT", value_name = "TE_WORKER_MAX_CONCURRENT", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub worker_max_concurrent: u32,
    /// Fallback poll interval when no wake-up arrives, in milliseconds.
    #[arg(long, env = "TE_WORKER_POLL_INTERVAL_MS", value_name = "TE_WORKER_POLL_INTERVAL_MS", default_value_t = 200,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub worker_poll_interval_ms: u64,
    /// How long a worker caches a config, in seconds.
    #[arg(long, env = "TE_CONFIG_CACHE_TTL_SEC", value_name = "TE_CONFIG_CACHE_TTL_SEC", default_value_t = 60)]
    pub config_cache_ttl_sec: u64,
    /// How long a worker caches a decrypted secret, in seconds.
    #[arg(long, env = "TE_SECRET_CACHE_TTL_SEC", value_name = "TE_SECRET_CACHE_TTL_SEC", default_value_t = 300)]
    pub secret_cache_ttl_sec: u64,
    /// How long shutdown waits for in-flight deliveries, in seconds. 5 s after it, the process
    /// exits whatever it is still doing (every role, the API's open streams too).
    #[arg(
        long,
        env = "TE_WORKER_SHUTDOWN_TIMEOUT_SEC",
        value_name = "TE_WORKER_SHUTDOWN_TIMEOUT_SEC",
        default_value_t = 30
    )]
    pub worker_shutdown_timeout_sec: u64,
    /// How long a claimed execution stays leased to its worker without renewal, in seconds.
    /// The worker renews its leases every third of this while it lives (and extends one for an
    /// attempt whose timeout reaches further); when a worker dies, its executions are retried
    /// once their leases run out. Default 30.
    #[arg(long, env = "TE_WORKER_LEASE_SEC", value_name = "TE_WORKER_LEASE_SEC",
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub worker_lease_sec: Option<u64>,
}

/// `TE_RETENTION`: a duration (`30d`, `12h`, `90m`, `3600s`); zero turns the purge off.
fn retention(text: &str) -> Result<Duration, String> {
    crate::duration::parse_seconds(text)
        .and_then(|seconds| u64::try_from(seconds).ok())
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is not a duration: write it as 30d, 12h, 90m or 3600s (0 keeps everything)"))
}

/// The lease when neither `TE_WORKER_LEASE_SEC` nor its old name is set.
pub const DEFAULT_LEASE_SEC: u64 = 30;

/// The scheduler role's settings (used by the scheduler; validated and listed here already).
#[derive(Debug, Args)]
#[command(next_help_heading = "Scheduler")]
pub struct SchedulerArgs {
    /// How often due cron ticks are materialized, in seconds.
    #[arg(long, env = "TE_CRON_TICK_INTERVAL_SEC", value_name = "TE_CRON_TICK_INTERVAL_SEC", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub cron_tick_interval_sec: u64,
    /// Cron jobs materialized per pass.
    #[arg(long, env = "TE_CRON_BATCH_SIZE", value_name = "TE_CRON_BATCH_SIZE", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub cron_batch_size: u32,
    /// How far ahead of its time a cron tick is materialized, in seconds (0: at its time).
    /// Ticks made ahead wait as PENDING executions and are released at the tick, so a busy
    /// minute's database work is done before the minute rather than at it.
    #[arg(long, env = "TE_CRON_LOOKAHEAD_SEC", value_name = "TE_CRON_LOOKAHEAD_SEC", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub cron_lookahead_sec: u64,
    /// How often due delayed executions are promoted, in milliseconds.
    #[arg(long, env = "TE_PROMOTE_INTERVAL_MS", value_name = "TE_PROMOTE_INTERVAL_MS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub promote_interval_ms: u64,
    /// How often stuck executions are reclaimed, in seconds.
    #[arg(long, env = "TE_RECLAIM_INTERVAL_SEC", value_name = "TE_RECLAIM_INTERVAL_SEC", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub reclaim_interval_sec: u64,
    /// How long finished executions (with their attempts and logs) and finished one-shot jobs
    /// are kept, from their creation: `30d`, `12h`, `90m`, `3600s`; `0` keeps them forever.
    #[arg(long, env = "TE_RETENTION", value_name = "TE_RETENTION", default_value = "30d", value_parser = retention)]
    pub retention: Duration,
    /// How often the retention purge runs, in seconds.
    #[arg(long, env = "TE_PURGE_INTERVAL_SEC", value_name = "TE_PURGE_INTERVAL_SEC", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub purge_interval_sec: u64,
    /// When the scheduler vacuums the queue's tables itself: `auto` (when PostgreSQL's
    /// autovacuum is off), `always`, or `off`.
    #[arg(long, env = "TE_VACUUM", value_name = "TE_VACUUM", value_enum, default_value_t = crate::scheduler::vacuumer::VacuumMode::Auto)]
    pub vacuum: crate::scheduler::vacuumer::VacuumMode,
    /// Deprecated: the old name of TE_WORKER_LEASE_SEC. Executions are no longer reclaimed
    /// after a fixed time RUNNING, only when their worker stops renewing their lease.
    #[arg(long, env = "TE_STUCK_EXECUTION_TIMEOUT_SEC", value_name = "TE_STUCK_EXECUTION_TIMEOUT_SEC",
          value_parser = clap::value_parser!(u64).range(3..=3600), hide = true)]
    pub stuck_execution_timeout_sec: Option<u64>,
}

impl ServeArgs {
    /// How long the process has, from SIGTERM, to stop by itself before it exits whatever it
    /// is doing: the in-flight deliveries' `TE_WORKER_SHUTDOWN_TIMEOUT_SEC` and 5 s to write
    /// their results.
    pub fn shutdown_deadline(&self) -> Duration {
        Duration::from_secs(self.worker.worker_shutdown_timeout_sec) + Duration::from_secs(5)
    }

    /// What the API and health servers allow their clients.
    pub fn server_limits(&self) -> crate::api::server::ServerLimits {
        self.server.limits()
    }

    /// Rules across settings, checked once at start-up; an error names every variable involved.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let (Some(lease), Some(old)) = (self.worker.worker_lease_sec, self.scheduler.stuck_execution_timeout_sec) {
            if lease != old {
                return Err(ConfigError::new(
                    "TE_STUCK_EXECUTION_TIMEOUT_SEC",
                    format!(
                        "{old} disagrees with TE_WORKER_LEASE_SEC={lease}; \
                         TE_STUCK_EXECUTION_TIMEOUT_SEC is the old name of TE_WORKER_LEASE_SEC: unset it"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The lease a claim takes: `TE_WORKER_LEASE_SEC`, or its old name, or the default.
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.worker.worker_lease_sec.or(self.scheduler.stuck_execution_timeout_sec).unwrap_or(DEFAULT_LEASE_SEC),
        )
    }
}

/// A setting that cannot be used, with the variable it came from: start-up stops with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {problem}")]
pub struct ConfigError {
    /// The environment variable (or variables, for a rule across settings).
    pub variable: &'static str,
    /// What is wrong, in words that never quote a secret.
    pub problem: String,
}

impl ConfigError {
    pub fn new(variable: &'static str, problem: impl Into<String>) -> Self {
        Self { variable, problem: problem.into() }
    }
}

/// Minimum length of an operator-chosen API key: shorter keys are guessable.
pub const MIN_API_KEY_LEN: usize = 16;

/// Split `TE_API_KEYS`; a bad entry names the variable and its position, never its text.
pub fn parse_api_keys(text: &str) -> Result<Vec<String>, ConfigError> {
    let keys: Vec<String> = text.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned).collect();
    if keys.is_empty() {
        return Err(ConfigError::new("TE_API_KEYS", "set but holds no key"));
    }
    if let Some(i) = keys.iter().position(|k| k.len() < MIN_API_KEY_LEN) {
        return Err(ConfigError::new(
            "TE_API_KEYS",
            format!("key #{} is shorter than {MIN_API_KEY_LEN} characters", i + 1),
        ));
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// docs/operations.md's table of settings names every `TE_*` variable `serve` reads.
    #[test]
    fn the_operations_guide_lists_every_setting() {
        let doc = include_str!("../../docs/operations.md");
        let command = Cli::command();
        let serve = command.find_subcommand("serve").expect("serve");
        let missing: Vec<String> = serve
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .filter(|env| !doc.contains(&format!("| `{env}` |")))
            .collect();
        assert!(missing.is_empty(), "docs/operations.md's settings table lacks {missing:?}");
    }

    /// Unset, the pool is sized for the process's roles and database; set, it is what it says.
    #[test]
    fn the_pool_is_sized_for_the_roles_unless_set() {
        #[derive(Parser)]
        struct Database {
            #[command(flatten)]
            args: DatabaseArgs,
        }
        let unset = Database::try_parse_from(["taskexec"]).unwrap().args;
        use crate::store::DatabaseLocation;
        let postgres = DatabaseLocation::Postgres("postgres://localhost/db".to_owned());
        let sqlite = DatabaseLocation::Sqlite("taskexec.db".into());
        assert_eq!(unset.pool_size(&postgres, true), DatabaseArgs::POOL_SIZE);
        assert_eq!(unset.pool_size(&postgres, false), DatabaseArgs::BACKGROUND_POOL_SIZE);
        assert_eq!(unset.pool_size(&sqlite, false), DatabaseArgs::POOL_SIZE);
        let set = Database::try_parse_from(["taskexec", "--db-pool-size", "3"]).unwrap().args;
        for (location, api) in [(&postgres, true), (&postgres, false), (&sqlite, false)] {
            assert_eq!(set.pool_size(location, api), 3);
        }
    }

    #[test]
    fn api_keys_parse() {
        assert_eq!(parse_api_keys(" aaaaaaaaaaaaaaaa , bbbbbbbbbbbbbbbb,").unwrap().len(), 2);
        let err = parse_api_keys("aaaaaaaaaaaaaaaa,short-secret").unwrap_err().to_string();
        assert!(err.contains("#2") && !err.contains("short-secret"), "{err}");
        assert!(parse_api_keys(" , ").is_err());
    }
}
