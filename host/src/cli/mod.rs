//! The command line: `serve`, `migrate`, `secrets rotate`, and the REST API's client commands
//! (`plugin`, `endpoints`, `configs`, `secrets`, `specs`, `jobs`, `executions`).

mod client;
mod embedded;
mod plugin;
mod plugin_dev;
mod resources;
mod secrets;
mod serve;
mod tenants;
mod watch;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

use crate::config::{
    Cli, Command, DatabaseArgs, EndpointsCommand, KeyArgs, LogArgs, LogFormat, MigrateArgs, SecretsCommand,
};
use crate::secret::{self, KeySource, SecretCipher};
use crate::store::{self, DatabaseLocation, Store};

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        // A command whose output is cut short (`| head`) stops as other Unix tools do. The
        // server keeps Rust's default (SIGPIPE ignored): a closed log pipe must not kill it.
        // SAFETY: called before any thread is started; SIG_DFL is a valid disposition.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("the tokio runtime starts");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(*args).await,
            Command::Migrate(args) => migrate(args).await,
            Command::Secrets(SecretsCommand::Rotate(args)) => secrets::rotate(args).await,
            Command::Secrets(SecretsCommand::Resource(command)) => {
                resources::resource(&resources::SECRETS, command).await
            }
            Command::Plugin(command) => plugin::run(command).await,
            Command::Endpoints(EndpointsCommand::Resource(command)) => {
                resources::resource(&resources::ENDPOINTS, command).await
            }
            Command::Endpoints(EndpointsCommand::Enable { name, output, api }) => {
                resources::endpoint_action(&name, "enable", &output, api).await
            }
            Command::Endpoints(EndpointsCommand::Pause { name, output, api }) => {
                resources::endpoint_action(&name, "pause", &output, api).await
            }
            Command::Endpoints(EndpointsCommand::Resume { name, output, api }) => {
                resources::endpoint_action(&name, "resume", &output, api).await
            }
            Command::Configs(command) => resources::resource(&resources::CONFIGS, command).await,
            Command::Specs(command) => resources::resource(&resources::SPECS, command).await,
            Command::Jobs(command) => resources::jobs(command).await,
            Command::Executions(command) => resources::executions(command).await,
            Command::Tenants(command) => tenants::tenants(command).await,
            Command::ApiKeys(command) => tenants::api_keys(command).await,
            Command::Completions { shell } => {
                use clap::CommandFactory;
                clap_complete::generate(shell, &mut Cli::command(), "taskexec", &mut std::io::stdout());
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("taskexec: {}", crate::error_chain::describe(error.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

fn init_logging(args: &LogArgs) -> anyhow::Result<()> {
    install_logging(args, None)
}

/// Logs, and traces (see `crate::trace`) for the processes that serve: every span gets W3C ids,
/// exported when an OTLP endpoint is set.
fn init_logging_and_traces(args: &LogArgs) -> anyhow::Result<crate::trace::Tracing> {
    let tracing =
        crate::trace::Tracing::from_env().context("OTEL_EXPORTER_OTLP_ENDPOINT: cannot set up trace export")?;
    install_logging(args, Some(&tracing))?;
    if let Some(endpoint) = &tracing.exporting_to {
        tracing::info!(%endpoint, "Exporting traces over OTLP/HTTP.");
    }
    Ok(tracing)
}

fn install_logging(args: &LogArgs, traces: Option<&crate::trace::Tracing>) -> anyhow::Result<()> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let mut filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .with_context(|| format!("TE_LOG: invalid filter '{}'", args.log))?;
    // PostgreSQL's notices below WARNING are the "already exists, skipping" of the migrations'
    // idempotent DDL at every start: not the service's news. A TE_LOG that names sqlx decides.
    if !args.log.contains("sqlx") {
        filter = filter.add_directive("sqlx::postgres::notice=warn".parse().expect("the directive parses"));
    }
    // Colour only for a person at a terminal: escape codes in a file or a log pipeline are noise.
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let text = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(colour);
    let logs = match args.log_format {
        LogFormat::Text => text.boxed(),
        LogFormat::Json => text.json().flatten_event(true).with_current_span(true).boxed(),
    };
    // TE_LOG filters the log lines only: the spans a trace is made of (the service's own, at
    // INFO) exist whatever the log level, so a quiet log still carries trace context.
    let spans = traces.map(|t| {
        t.layer().with_filter(tracing_subscriber::filter::Targets::new().with_target("taskexec", tracing::Level::INFO))
    });
    tracing_subscriber::registry().with(logs.with_filter(filter)).with(spans).try_init()?;
    Ok(())
}

fn database_location(args: &DatabaseArgs) -> anyhow::Result<DatabaseLocation> {
    DatabaseLocation::parse(args.database_url.as_deref()).map_err(anyhow::Error::from)
}

/// The store, with as many connections as a process that does (`api`) or does not serve the
/// API needs on its database (`DatabaseArgs::pool_size`).
async fn open_store(
    location: &DatabaseLocation,
    args: &DatabaseArgs,
    api: bool,
) -> anyhow::Result<std::sync::Arc<dyn Store>> {
    let what = match location {
        DatabaseLocation::Postgres(_) => "the PostgreSQL database named by TE_DATABASE_URL".to_owned(),
        DatabaseLocation::Sqlite(path) => format!("the SQLite database {}", path.display()),
    };
    store::connect_with(location, args.pool_size(location, api), args.db_worker_commits, args.listen_via())
        .await
        .with_context(|| format!("cannot open {what}"))
}

/// The key file of embedded mode: beside the database, named after it.
fn key_file_for(location: &DatabaseLocation) -> Option<PathBuf> {
    match location {
        DatabaseLocation::Postgres(_) => None,
        DatabaseLocation::Sqlite(path) => {
            let mut name = path.file_name().unwrap_or_default().to_os_string();
            name.push(".key");
            Some(path.with_file_name(name))
        }
    }
}

fn load_cipher(location: &DatabaseLocation, keys: &KeyArgs) -> anyhow::Result<SecretCipher> {
    let (current, previous, source) = secret::load_keys(
        keys.secret_encryption_key.as_deref(),
        keys.secret_encryption_key_previous.as_deref(),
        key_file_for(location).as_deref(),
    )?;
    let cipher = SecretCipher::new(&current, &previous);
    let key_id = cipher.current_key_id();
    match source {
        KeySource::Environment => tracing::info!(%key_id, "Secrets are encrypted under TE_SECRET_ENCRYPTION_KEY."),
        KeySource::KeyFile { path, generated: true } => tracing::warn!(
            %key_id, path = %path.display(),
            "TE_SECRET_ENCRYPTION_KEY is not set: generated a secret encryption key into this file (mode 0600). Back it up with the database; without it, stored secrets cannot be read."
        ),
        KeySource::KeyFile { path, generated: false } => {
            tracing::info!(%key_id, path = %path.display(), "Secrets are encrypted under the key in this file.")
        }
    }
    Ok(cipher)
}

async fn migrate(args: MigrateArgs) -> anyhow::Result<()> {
    init_logging(&args.log)?;
    let location = database_location(&args.database)?;
    let store = open_store(&location, &args.database, false).await?;
    store.migrate().await.context("migration failed")?;
    tracing::info!(backend = ?store.backend(), "Migrations applied.");
    Ok(())
}
