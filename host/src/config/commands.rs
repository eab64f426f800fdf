//! The client commands' arguments: what `taskexec jobs|executions|endpoints|plugin|secrets|
//! configs|specs|tenants|api-keys …` take, each talking to the REST API at `TE_URL` (`cli`).

use clap::{Args, Subcommand};

use super::RotateArgs;

/// How a client command prints: a table (or a summary) for people, or the API's JSON.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Print the API's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A request body from a JSON file, and where and how the answer goes.
#[derive(Debug, Args)]
pub struct BodyArgs {
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: std::path::PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Create, list, read, replace and delete a named resource.
#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Create from a JSON file (`-` reads standard input), the body `POST` takes.
    Create {
        #[command(flatten)]
        body: BodyArgs,
    },
    /// List them all, oldest first.
    List {
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show one, as JSON.
    Get {
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Replace one from a JSON file (`-` reads standard input), the body `PUT` takes.
    Update {
        name: String,
        #[command(flatten)]
        body: BodyArgs,
    },
    /// Delete one (refused while something uses it).
    Delete {
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// What a job is made of when it is given by flags rather than a file.
#[derive(Debug, Args)]
pub struct JobFlags {
    /// A JSON file with the whole `POST /jobs` body (`-` reads standard input); the flags
    /// below are for the common cases.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with_all = ["endpoint", "cron", "schedule", "run_at", "delay_ms", "input", "key", "jitter_ms"])]
    pub file: Option<std::path::PathBuf>,
    /// The endpoint to deliver to.
    #[arg(long, required_unless_present = "file")]
    pub endpoint: Option<String>,
    /// A cron expression: makes a CRON job (with --tz).
    #[arg(long, conflicts_with_all = ["run_at", "delay_ms", "schedule"])]
    pub cron: Option<String>,
    /// A schedule plugin (`NAME` or `NAME@VERSION`) in place of a cron expression: makes a
    /// CRON job whose ticks the plugin computes (with --spec and --tz).
    #[arg(long, value_name = "PLUGIN", conflicts_with_all = ["run_at", "delay_ms"])]
    pub schedule: Option<String>,
    /// The schedule plugin's spec, as JSON (`{}` when not given).
    #[arg(long, value_name = "JSON", requires = "schedule")]
    pub spec: Option<String>,
    /// The schedule's IANA timezone.
    #[arg(long = "tz", default_value = "UTC")]
    pub timezone: String,
    /// A CRON job's ticks each fire up to this many milliseconds after their time (0 to
    /// 3,600,000), so that many jobs on one schedule spread out.
    #[arg(long, value_name = "MS")]
    pub jitter_ms: Option<i32>,
    /// When to fire (RFC 3339): makes a DELAYED job.
    #[arg(long, conflicts_with = "delay_ms")]
    pub run_at: Option<String>,
    /// Fire this many milliseconds from now: makes a DELAYED job.
    #[arg(long)]
    pub delay_ms: Option<u64>,
    /// The job's input, as JSON.
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
    /// The idempotency key (a one-shot job gets a new random one when it is not given).
    #[arg(long)]
    pub key: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Create a job: IMMEDIATE by default, DELAYED with --run-at or --delay-ms, CRON with --cron.
    Create {
        #[command(flatten)]
        job: JobFlags,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List jobs, oldest first.
    List {
        #[arg(long)]
        endpoint: Option<String>,
        /// ACTIVE or RETIRED.
        #[arg(long)]
        status: Option<String>,
        /// IMMEDIATE, DELAYED or CRON.
        #[arg(long)]
        trigger: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a job, as JSON.
    Get {
        job_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// What a job is doing now and how it did over the last 24 hours, as JSON.
    Status {
        job_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// A cron job's next ticks, in UTC and in its timezone, as the scheduler will make them.
    Upcoming {
        job_id: String,
        /// How many ticks (1 to 100).
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List a job's executions.
    Executions {
        job_id: String,
        /// Only executions with this status.
        #[arg(long)]
        status: Option<String>,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Cancel a job: a cron job stops ticking; a one-shot job's execution is cancelled if it
    /// has not started.
    Cancel {
        job_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Pause a CRON job: no ticks until it is resumed.
    Pause {
        job_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Resume a paused CRON job from the next tick (`--catch-up`: from the first tick missed,
    /// as its catchup_policy says).
    Resume {
        job_id: String,
        #[arg(long)]
        catch_up: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Fire a CRON job now, outside its schedule (under its overlap policy).
    Trigger {
        job_id: String,
        /// Fire once however often the command is run with this key (the Idempotency-Key header).
        #[arg(long)]
        key: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Make the ticks a CRON job's schedule had in a past range (at most 1,000; ticks that
    /// already have an execution are not made again).
    Backfill {
        job_id: String,
        /// The range's start, RFC 3339 (its ticks at or after it).
        #[arg(long)]
        from: String,
        /// The range's end, RFC 3339, no later than now (its ticks before it).
        #[arg(long)]
        to: String,
        /// allow, skip or buffer_one in place of the job's own overlap policy (`allow` runs
        /// every tick of the range).
        #[arg(long)]
        overlap_policy: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Follow a job's executions as they change (server-sent events), with a progress line,
    /// until a one-shot job's execution ends (a cron job: until Ctrl-C).
    Watch {
        job_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ExecutionsCommand {
    /// List executions across jobs, oldest first (`--status FAILED`: the dead letters).
    List {
        #[command(flatten)]
        filter: ExecutionFilterArgs,
        /// Show at most this many.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Retry a FAILED or CANCELLED execution: a new execution, with the endpoint as it is now.
    Retry {
        execution_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Retry in bulk the FAILED (or `--status CANCELLED`) executions the filters match, at most
    /// `--limit` of them, none twice.
    Replay {
        #[command(flatten)]
        filter: ExecutionFilterArgs,
        /// Retry at most this many (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show an execution, as JSON.
    Get {
        execution_id: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List an execution's attempts (the one in flight last).
    Attempts {
        execution_id: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Print an execution's log lines in order.
    Logs {
        execution_id: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Cancel an execution that has not started (with --abort, also one in flight).
    Cancel {
        execution_id: String,
        /// Also cancel it while it runs: its delivery is stopped where it is (the attempt and
        /// the execution CANCELLED, never retried).
        #[arg(long)]
        abort: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Which executions `executions list` and `executions replay` take.
#[derive(Debug, Args)]
pub struct ExecutionFilterArgs {
    /// PENDING, QUEUED, RUNNING, RETRYING, SUCCESS, FAILED or CANCELLED.
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long)]
    pub endpoint: Option<String>,
    #[arg(long)]
    pub job: Option<String>,
    /// Created at or after this time (RFC 3339, e.g. 2026-11-24T09:00:00Z).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Created before this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
}

impl ExecutionFilterArgs {
    /// The filters given, by their names in the API (query parameters and replay's body).
    pub fn fields(self) -> Vec<(&'static str, String)> {
        [
            ("status", self.status),
            ("endpoint", self.endpoint),
            ("job_id", self.job),
            ("created_after", self.since),
            ("created_before", self.until),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| (name, v)))
        .collect()
    }
}

#[derive(Debug, Args)]
pub struct ApiArgs {
    /// The service's base URL.
    #[arg(long, env = "TE_URL", value_name = "TE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// An API key of the service.
    #[arg(long, env = "TE_API_KEY", value_name = "TE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// With an operator key: the tenant to act within (sent as the `taskexec-tenant` header);
    /// unset: `default`.
    #[arg(long, env = "TE_WITHIN_TENANT", value_name = "TE_WITHIN_TENANT")]
    pub within_tenant: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Upload a component as a new version of plugin NAME.
    Install {
        /// The component (.wasm) to install.
        file: std::path::PathBuf,
        /// The plugin's name (lowercase letters, digits and hyphens).
        #[arg(long)]
        name: String,
        /// A URL pattern the plugin may call (`scheme://host[:port]`, `*` per part); repeatable.
        #[arg(long = "allow-host", value_name = "URL")]
        allow_host: Vec<String>,
        /// Linear memory for each call, in MiB (default 64).
        #[arg(long)]
        memory_mb: Option<u32>,
        /// Deliveries one instance of a transport plugin may make, one after another and all
        /// for one endpoint version (default 1: a fresh instance for every delivery; at most
        /// 1000). Faster, for plugins that keep no state that matters between deliveries.
        #[arg(long)]
        calls_per_instance: Option<u32>,
        /// The world the component must implement: transport-plugin, renderer-plugin, classifier-plugin or schedule-plugin.
        #[arg(long)]
        world: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List installed plugins (newest version of each).
    List {
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show a plugin and all its versions.
    Show {
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Remove a plugin and all its versions (refused while endpoints use it), or one version
    /// with --version (refused while an endpoint is pinned to it).
    Remove {
        name: String,
        /// Remove only this version.
        #[arg(long)]
        version: Option<i32>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Bring back an earlier version (default: the one before the newest), installed again as
    /// the newest; endpoints that are not pinned use it from their next delivery.
    Rollback {
        name: String,
        /// The version to bring back.
        #[arg(long)]
        to: Option<i32>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Check a component offline: compile it, type-check it against its world, and print what
    /// it exports and imports.
    Check {
        file: std::path::PathBuf,
        /// The world it must implement: transport-plugin, renderer-plugin, classifier-plugin or schedule-plugin.
        #[arg(long)]
        world: Option<String>,
    },
    /// Run a component locally, in the same sandbox as the service, with no server or
    /// database: validate the spec, render its templates against the input (and config and
    /// secrets), deliver, and print the receipt or failure with the plugin's logs. A renderer
    /// plugin renders the spec and prints the result; a classifier prints its verdict on
    /// --answer; a schedule lists its next --ticks local times after --after. Exits 1 when the
    /// delivery fails.
    Run {
        file: std::path::PathBuf,
        /// The endpoint spec (JSON), with its templates; a schedule's spec.
        #[arg(long, default_value = "{}")]
        spec: String,
        /// The job's input (JSON) the templates read as {{input.*}}.
        #[arg(long, default_value = "{}")]
        input: String,
        /// The config values (a JSON object) the templates read as {{config.*}}.
        #[arg(long, default_value = "{}")]
        config: String,
        /// A secret the templates read as {{secret.NAME}}, as NAME=VALUE; repeatable.
        #[arg(long = "secret", value_name = "NAME=VALUE")]
        secrets: Vec<String>,
        /// A URL pattern the plugin may call (`scheme://host[:port]`, `*` per part); repeatable.
        #[arg(long = "allow-host", value_name = "URL")]
        allow_host: Vec<String>,
        /// The delivery's deadline, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// Linear memory for the call, in MiB (default 64).
        #[arg(long)]
        memory_mb: Option<u32>,
        /// A classifier's answer to judge: `{"status": 200, "headers": {…}, "body": "…"}`.
        #[arg(long)]
        answer: Option<String>,
        /// A schedule's start, as a local time `YYYY-MM-DDTHH:MM:SS` (default: now, UTC).
        #[arg(long)]
        after: Option<String>,
        /// How many of a schedule's ticks to list.
        #[arg(long, default_value_t = 5)]
        ticks: usize,
    },
    /// Start a plugin crate: Cargo.toml with a release profile that keeps components small,
    /// the guest SDK (with the WIT package it is built against), and a lib.rs for the world
    /// that builds and has a test.
    New {
        /// The plugin's name; also the crate's directory (under --dir).
        name: String,
        /// transport (the default), renderer, classifier or schedule.
        #[arg(long, default_value = "transport")]
        world: String,
        /// Where to make the crate's directory.
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// Write the WIT package (taskexec:plugin and the WASI packages it uses) into DIR.
    Wit { dir: std::path::PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum EndpointsCommand {
    #[command(flatten)]
    Resource(ResourceCommand),
    /// Enable an endpoint after it was disabled, or close its open circuit now: its waiting
    /// executions are delivered again.
    Enable {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Pause an endpoint: its executions wait (cron ticks are still made) until it is resumed.
    Pause {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Resume a paused endpoint: its waiting executions are delivered.
    Resume {
        name: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Re-encrypt every secret under the current TE_SECRET_ENCRYPTION_KEY. Run it after
    /// moving the old key to TE_SECRET_ENCRYPTION_KEY_PREVIOUS; see docs/secrets.md. Works
    /// on the database directly.
    Rotate(RotateArgs),
    #[command(flatten)]
    Resource(ResourceCommand),
}

#[derive(Debug, Subcommand)]
pub enum TenantsCommand {
    /// Make a tenant (operator keys only); making one that exists changes nothing.
    Create {
        /// Lowercase letters, digits and single hyphens.
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List the tenants (operator keys only).
    List {
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show one, as JSON.
    Get {
        name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// Which tenant an API-key command is about.
#[derive(Debug, Args)]
pub struct TenantArg {
    /// The tenant whose keys these are.
    #[arg(long, default_value = crate::store::DEFAULT_TENANT)]
    pub tenant: String,
}

#[derive(Debug, Subcommand)]
pub enum ApiKeysCommand {
    /// Issue a key with a role; the key is printed this once.
    Create {
        /// admin (everything within the tenant, its keys included), write (everything but
        /// keys) or read (GET alone).
        #[arg(long)]
        role: crate::domain::KeyRole,
        /// What the key is for.
        #[arg(long)]
        label: Option<String>,
        #[command(flatten)]
        tenant: TenantArg,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// List the tenant's keys, revoked ones included (never the keys themselves).
    List {
        #[command(flatten)]
        tenant: TenantArg,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Show one key's record, as JSON.
    Get {
        key_id: String,
        #[command(flatten)]
        tenant: TenantArg,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Revoke a key: every API process refuses it within a second.
    Revoke {
        key_id: String,
        #[command(flatten)]
        tenant: TenantArg,
        #[command(flatten)]
        api: ApiArgs,
    },
}
