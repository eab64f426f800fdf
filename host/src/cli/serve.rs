//! `taskexec serve`: open the store, migrate, settle the keys, and run the roles.

use std::sync::Arc;

use anyhow::{bail, Context};
use tokio::net::TcpListener;

use super::{database_location, init_logging, load_cipher, open_store};
use crate::api::{self, auth, ApiKeys, AppState};
use crate::config::{parse_api_keys, Role, ServeArgs};
use crate::store::{Backend, Store};
use crate::template::MinijinjaRenderer;
use crate::transport::Transports;

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(&args.log)?;
    let location = database_location(&args.database)?;
    let explicit_keys = args.api_keys.as_deref().map(parse_api_keys).transpose().map_err(anyhow::Error::msg)?;
    let cipher = load_cipher(&location, &args.keys)?;
    let store = open_store(&location, &args.database).await?;
    if args.no_migrate {
        tracing::info!("TE_NO_MIGRATE is set: not applying migrations.");
    } else {
        store.migrate().await.context("migration failed")?;
    }
    tracing::info!(backend = ?store.backend(), "Store ready.");

    let engine_roles: Vec<Role> = args.roles.iter().copied().filter(|r| *r != Role::Api).collect();
    if !engine_roles.is_empty() {
        // Honest about what this build does: the engine lands with its own issue.
        tracing::warn!(roles = ?engine_roles, "This build does not run the scheduler and worker roles yet; only the API serves.");
    }
    if !args.roles.contains(&Role::Api) {
        bail!("TE_ROLES: this build only has the api role; include `api`");
    }

    let api_keys = settle_api_keys(store.as_ref(), explicit_keys).await?;
    let state = AppState {
        store,
        cipher: Arc::new(cipher),
        transports: Transports::native(),
        renderer: Arc::new(MinijinjaRenderer::new()),
    };
    let max_body_bytes =
        usize::try_from(args.max_body_bytes).context("TE_MAX_BODY_BYTES is too large for this platform")?;
    let app = api::router(state, Arc::new(api_keys), max_body_bytes);

    let listener = TcpListener::bind(args.listen_addr)
        .await
        .with_context(|| format!("TE_LISTEN_ADDR: cannot listen on {}", args.listen_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "Listening.");
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await.context("the API server failed")?;
    tracing::info!("Stopped.");
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

async fn shutdown_signal() {
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
    tracing::info!("Shutting down: no new requests; finishing those in flight.");
}
