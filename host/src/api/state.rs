//! What every handler can reach.

use std::sync::Arc;

use axum::extract::FromRef;

use super::health::HealthState;
use super::validators::Validators;
use crate::plugin::PluginHost;
use crate::scheduler::Wakeups;
use crate::secret::SecretCipher;
use crate::store::Store;
use crate::template::Renderers;
use crate::transport::Transports;

/// What every handler can reach, behind one `Arc`: axum clones the state for every request
/// (and every `from_fn_with_state` layer again), and cloning the handles one by one touched
/// about thirty reference counts from both cores each time — in `perf` during 32 concurrent
/// `POST /jobs`, the clones and their drops were ~4% of the server's CPU.
#[derive(Clone)]
pub struct AppState(Arc<AppContext>);

impl AppState {
    pub fn new(context: AppContext) -> Self {
        Self(Arc::new(context))
    }
}

impl std::ops::Deref for AppState {
    type Target = AppContext;

    fn deref(&self) -> &AppContext {
        &self.0
    }
}

/// The handles an [`AppState`] shares.
pub struct AppContext {
    pub store: Arc<dyn Store>,
    pub cipher: Arc<SecretCipher>,
    /// Registration asks each endpoint's transport to check its spec.
    pub transports: Transports,
    /// Registration asks the renderer to check the spec's templates.
    pub renderers: Renderers,
    /// New work wakes this process's worker and scheduler at once.
    pub wakeups: Wakeups,
    /// How far ahead a DELAYED job may be scheduled (`TE_MAX_SCHEDULE_AHEAD_DAYS`).
    pub max_schedule_ahead: chrono::Duration,
    /// Compiled payload-spec validators.
    pub validators: Arc<Validators>,
    /// The plugin runtime and store, for /plugins and PLUGIN endpoints.
    pub plugins: PluginHost,
    /// For `/healthz` and `/readyz`.
    pub health: HealthState,
    /// Writes single creates that arrive together in one transaction.
    pub job_writer: crate::store::coalesce::JobWriter,
    /// Reads the endpoints of single creates that arrive together in one query.
    pub endpoint_reader: crate::store::coalesce::EndpointReader,
    /// The API keys: a key issued or revoked here holds here at once.
    pub keys: Arc<super::ApiKeys>,
    /// Every tenant's quotas: a change made here holds here at once.
    pub quotas: Arc<crate::quota::QuotaBook>,
}

impl FromRef<AppState> for HealthState {
    fn from_ref(state: &AppState) -> Self {
        state.health.clone()
    }
}
