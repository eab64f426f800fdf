//! `taskexec serve`: open the store, migrate, settle the keys, and run the roles.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{database_location, init_logging_and_traces, load_cipher, open_store};
use crate::api::health::HealthState;
use crate::api::{self, auth, ApiKeys, AppContext, AppState};
use crate::config::{parse_api_keys, Role, ServeArgs};
use crate::egress::EgressPolicy;
use crate::health::Liveness;
use crate::plugin::{PluginHost, PluginRuntime};
use crate::region::heartbeat;
use crate::scheduler::{self, SchedulerConfig, Wakeups};
use crate::store::{Backend, Store};
use crate::template::Renderers;
use crate::transport::Transports;
use crate::worker::{self, CacheTtls, Pipeline, WorkerConfig};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let traces = init_logging_and_traces(&args.log)?;
    args.check()?;
    crate::metrics::install();
    if args.scheduler.stuck_execution_timeout_sec.is_some() {
        tracing::warn!(
            "TE_STUCK_EXECUTION_TIMEOUT_SEC is deprecated: it sets the lease (TE_WORKER_LEASE_SEC); rename it."
        );
    }
    // Listen first: an address in use stops start-up before any file is made or any loop runs.
    let health_listener = match args.health_addr {
        Some(addr) => Some(api::health::bind(addr).await?),
        None => None,
    };
    let api_listener = match args.roles.contains(&Role::Api) {
        true => Some(
            TcpListener::bind(args.listen_addr)
                .await
                .with_context(|| format!("TE_LISTEN_ADDR: cannot listen on {}", args.listen_addr))?,
        ),
        false => None,
    };
    let location = database_location(&args.database)?;
    let explicit_keys = args.api_keys.as_deref().map(parse_api_keys).transpose()?;
    let cipher = load_cipher(&location, &args.keys)?;
    // What marks this deployment's deliveries (every process derives the same from the key).
    let delivery_mark: String = cipher.derive("delivery-mark")[..16].iter().map(|b| format!("{b:02x}")).collect();
    let store = open_store(&location, &args.database, args.roles.contains(&Role::Api)).await?;
    if args.no_migrate {
        tracing::info!("TE_NO_MIGRATE is set: not applying migrations.");
    } else {
        store.migrate().await.context("migration failed")?;
    }
    tracing::info!(backend = ?store.backend(), "Store ready.");

    let api_keys = settle_api_keys(store.as_ref(), explicit_keys)
        .await?
        .with_rate_limit(args.api_rate_limit, args.api_rate_burst)
        .with_failure_limit(args.server.auth_failures_per_minute)
        .with_delivery_mark(delivery_mark.clone());
    // Keys issued to tenants, held from the first request on (then reloaded by the API role).
    api_keys.replace_issued(store.tenant_keys_active().await.context("reading the tenants' API keys")?);
    let cipher = Arc::new(cipher);
    let cache_dir = args.plugins.plugin_cache_dir.clone().unwrap_or_else(|| match &location {
        crate::store::DatabaseLocation::Sqlite(path) => path.with_file_name("plugin-cache"),
        crate::store::DatabaseLocation::Postgres(_) => "plugin-cache".into(),
    });
    let memory_total =
        args.plugins.plugin_memory_total_mb.unwrap_or_else(crate::plugin::runtime::default_memory_total_mb);
    let runtime = PluginRuntime::with_memory_total(Some(cache_dir), args.plugins.plugin_memory_mb_max, memory_total)
        .map_err(|e| anyhow::anyhow!("the plugin runtime failed to start: {e}"))?;
    let egress = Arc::new(
        EgressPolicy::parse(args.egress_allow.as_deref(), args.egress_deny.as_deref())?
            .with_delivery_mark(delivery_mark.clone()),
    );
    let plugins = PluginHost::new(runtime, store.clone()).with_egress_policy(egress.clone());
    plugins.follow_changes().await;
    let transports = Transports::with_egress(plugins.clone(), egress);
    let renderers = Renderers::new(plugins.clone(), args.input_limits.render_build_bytes());
    let wakeups = Wakeups::default();
    let shutdown = CancellationToken::new();
    let liveness = Liveness::new();
    let health = HealthState { store: store.clone(), liveness: liveness.clone() };
    let instance = format!("{}-{}", std::process::id(), &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let mut background = Vec::new();
    if let Some(listener) = health_listener {
        tracing::info!(addr = %listener.local_addr()?, "Health endpoint listening.");
        background.push(tokio::spawn(api::health::serve(
            listener,
            health.clone(),
            args.server_limits(),
            shutdown.clone(),
        )));
    }

    if args.roles.contains(&Role::Scheduler) {
        let s = &args.scheduler;
        let config = SchedulerConfig {
            cron_tick_interval: Duration::from_secs(s.cron_tick_interval_sec),
            cron_batch_size: i64::from(s.cron_batch_size),
            cron_lookahead: Duration::from_secs(s.cron_lookahead_sec),
            promote_interval: Duration::from_millis(s.promote_interval_ms),
            reclaim_interval: Duration::from_secs(s.reclaim_interval_sec),
            retention: s.retention,
            purge_interval: Duration::from_secs(s.purge_interval_sec),
            vacuum: s.vacuum,
        };
        background.extend(scheduler::spawn(
            store.clone(),
            plugins.clone(),
            config,
            wakeups.clone(),
            shutdown.clone(),
            &liveness,
        ));
        background.push(tokio::spawn(heartbeat::run(store.clone(), format!("scheduler:{instance}"), shutdown.clone())));
        tracing::info!("Scheduler running.");
    }
    if args.roles.contains(&Role::Worker) {
        let w = &args.worker;
        let worker_id = format!("worker-{instance}");
        let pipeline = Arc::new(Pipeline::new(
            store.clone(),
            cipher.clone(),
            transports.clone(),
            renderers.clone(),
            worker_id.clone(),
            CacheTtls {
                config: Duration::from_secs(w.config_cache_ttl_sec),
                secret: Duration::from_secs(w.secret_cache_ttl_sec),
            },
        ));
        let config = WorkerConfig {
            worker_id: worker_id.clone(),
            max_concurrent: w.worker_max_concurrent as usize,
            poll_interval: Duration::from_millis(w.worker_poll_interval_ms),
            shutdown_timeout: Duration::from_secs(w.worker_shutdown_timeout_sec),
            lease: args.lease(),
        };
        background.push(tokio::spawn(worker::run(
            store.clone(),
            pipeline,
            config,
            wakeups.clone(),
            shutdown.clone(),
            liveness.clone(),
        )));
        background.push(tokio::spawn(heartbeat::run(store.clone(), worker_id, shutdown.clone())));
        tracing::info!(max_concurrent = w.worker_max_concurrent, lease_s = args.lease().as_secs(), "Worker running.");
    }

    if args.roles.contains(&Role::Api) {
        let api_keys = Arc::new(api_keys);
        background.push(tokio::spawn(api_keys.clone().keep_issued_loaded(store.clone(), shutdown.clone())));
        let quotas = Arc::new(crate::quota::QuotaBook::new(args.quotas.defaults()));
        // Held from the first request on, then reloaded with the keys.
        quotas.replace(
            store
                .tenants_with_quotas()
                .await
                .context("reading the tenants' quotas")?
                .into_iter()
                .filter_map(|t| Some((t.name, t.quotas?)))
                .collect(),
        );
        background.push(tokio::spawn(quotas.clone().keep_loaded(
            store.clone(),
            auth::ISSUED_KEYS_RELOAD,
            shutdown.clone(),
        )));
        let state = AppState::new(AppContext {
            store: store.clone(),
            cipher,
            transports,
            renderers,
            wakeups,
            max_schedule_ahead: chrono::Duration::days(i64::from(args.max_schedule_ahead_days)),
            validators: Arc::new(args.input_limits.validators()),
            plugins,
            health: health.clone(),
            job_writer: crate::store::coalesce::JobWriter::spawn(store.clone()),
            endpoint_reader: crate::store::coalesce::EndpointReader::spawn(store.clone()),
            keys: api_keys.clone(),
            quotas,
        });
        let max_body_bytes =
            usize::try_from(args.max_body_bytes).context("TE_MAX_BODY_BYTES is too large for this platform")?;
        let max_plugin_bytes =
            usize::try_from(args.plugins.plugin_max_bytes).context("TE_PLUGIN_MAX_BYTES is too large")?;
        let (audit, audit_writer) = api::audit::AuditLog::spawn(store.clone(), shutdown.clone());
        background.push(audit_writer);
        let app = api::router(state.clone(), api_keys.clone(), audit, max_body_bytes, max_plugin_bytes);
        // The dashboard reads and acts through the API's own router, in-process.
        let app = crate::dashboard::router(state, app.clone(), api_keys, args.server.ui_session_ttl()).merge(app);
        let listener = api_listener.expect("bound at start for the API role");
        tracing::info!(addr = %listener.local_addr()?, "Listening.");
        let stop = shutdown.clone();
        let deadline = args.shutdown_deadline();
        api::server::serve(listener, app, args.server_limits(), async move {
            shutdown_signal(deadline).await;
            stop.cancel();
        })
        .await;
    } else {
        shutdown_signal(args.shutdown_deadline()).await;
    }
    shutdown.cancel();
    for task in background {
        let _ = task.await;
    }
    tracing::info!("Stopped.");
    traces.shutdown().await;
    Ok(())
}

/// The keys the API accepts: `TE_API_KEYS` when set; otherwise the ones this service generated
/// earlier; otherwise (embedded mode only) a new one, printed once. Only hashes are stored.
async fn settle_api_keys(store: &dyn Store, explicit: Option<Vec<String>>) -> anyhow::Result<ApiKeys> {
    if let Some(keys) = explicit {
        tracing::info!(count = keys.len(), "API keys from TE_API_KEYS.");
        return Ok(ApiKeys::from_hashes(keys.iter().map(|k| auth::hash_key(k)).collect()));
    }
    let stored: Vec<auth::KeyHash> =
        store.api_key_hashes().await?.into_iter().filter_map(|h| h.try_into().ok()).collect();
    if !stored.is_empty() {
        tracing::info!(
            count = stored.len(),
            "Using the API key generated at first start (set TE_API_KEYS to use your own)."
        );
        return Ok(ApiKeys::from_hashes(stored));
    }
    if store.backend() == Backend::Postgres {
        bail!("TE_API_KEYS is not set. With PostgreSQL, set it to one or more comma-separated keys of at least 16 characters (for example `openssl rand -hex 32`)");
    }
    let key = auth::generate_key();
    let hash = auth::hash_key(&key);
    store.api_key_insert(&hash).await?;
    // Printed, not logged: the operator needs it once, and log pipelines keep lines forever.
    eprintln!(
        "\n  Generated an API key. It is shown only this once; only its hash is stored.\n\n      {key}\n\n  \
         Send it as `Authorization: Bearer <key>`. To use keys of your own, set TE_API_KEYS.\n"
    );
    Ok(ApiKeys::from_hashes(vec![hash]))
}

/// Wait for SIGTERM or Ctrl-C; from then on the process has `deadline` to stop by itself
/// before it is ended whatever it is doing (a stream of events held open, a database that does
/// not answer, a loop with a long round): what was in flight is left to its lease.
async fn shutdown_signal(deadline: Duration) {
    let ctrl_c = async {
        tokio::signal::ctrl_c().await.ok();
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!(
        deadline_s = deadline.as_secs(),
        "Shutting down: no new requests or claims; finishing those in flight (Ctrl-C again to stop at once)."
    );
    // A thread of its own, not a task: it must fire even if the runtime's threads are busy.
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        tracing::error!(
            deadline_s = deadline.as_secs(),
            "Shutdown did not finish in time; exiting now. Executions in flight will be retried when their leases expire."
        );
        std::process::exit(1);
    });
    // A second Ctrl-C means now: whatever is in flight is left to its lease.
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("Stopping at once; attempts in flight will be retried when their leases expire.");
            std::process::exit(130);
        }
    });
}
