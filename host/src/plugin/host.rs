//! The plugin host: the runtime, the store plugins are kept in, and the newest version of each
//! plugin this process has looked up. Each call runs the plugin's newest version, so installing
//! a new version applies from the next attempt. The plugins behind the service's own traits
//! live with those traits: `transport::wasm` and `template::wasm`.

use crate::egress::EgressPolicy;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::engine::Loaded;
use super::error::PluginError;
use super::grants::Grants;
use super::instances::SpareInstance;
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::runtime::PluginRuntime;
use crate::domain::PluginRef;
use crate::store::{PluginRecord, Signal, Store};
use crate::transport::PooledTransports;

/// How long a process trusts its cached newest version of a plugin without hearing of a change.
/// Installs in this process (and, on PostgreSQL, in any process, by NOTIFY) take effect at once;
/// this bounds the delay only where no notification can arrive (CockroachDB).
const NEWEST_VERSION_TTL: Duration = Duration::from_secs(1);

/// Numbers each [`ReadyPlugin`] a process loads.
static NEXT_READY_ID: AtomicU64 = AtomicU64::new(1);

/// A plugin version ready to call, with its grants and limits parsed once.
pub struct ReadyPlugin {
    /// This process's number for it: instances may be shared only among deliveries through
    /// one `ReadyPlugin` (one version, grants and limits), never across a reinstall.
    pub id: u64,
    pub record: PluginRecord,
    pub loaded: Arc<Loaded>,
    /// Its grants and its own HTTP client (keep-alive connections live as long as the version).
    pub egress: Arc<Egress>,
    pub limits: PluginLimits,
    /// The next call's instance, made ahead (transport plugins).
    pub spare: Arc<SpareInstance>,
}

/// What plugin calls need: the runtime, the store the plugins are kept in, and the newest
/// version of each plugin this process has looked up (reading it from the database on every
/// delivery was a fifth of a plugin delivery's time).
#[derive(Clone)]
pub struct PluginHost {
    pub runtime: Arc<PluginRuntime>,
    pub store: Arc<dyn Store>,
    newest: Arc<NewestVersions>,
    /// The operator's egress policy, applied to plugins' requests on top of their grants.
    egress_policy: Arc<EgressPolicy>,
    /// The Kafka and Redis clients plugins produce and append through (the process's own).
    pooled: PooledTransports,
}

#[derive(Default)]
struct NewestVersions {
    /// Bumped by every change heard of; entries from an older generation are stale.
    generation: AtomicU64,
    /// By reference: `name` (the newest) or `name@version` (pinned).
    entries: Mutex<HashMap<PluginRef, CachedVersion>>,
}

struct CachedVersion {
    ready: Arc<ReadyPlugin>,
    generation: u64,
    fetched: Instant,
}

impl PluginHost {
    pub fn new(runtime: Arc<PluginRuntime>, store: Arc<dyn Store>) -> Self {
        Self {
            runtime,
            store,
            newest: Arc::default(),
            egress_policy: Arc::default(),
            pooled: PooledTransports::default(),
        }
    }

    /// Hold plugins' requests, and the Kafka and Redis clients, to `policy` (the default policy
    /// otherwise).
    pub fn with_egress_policy(mut self, policy: Arc<EgressPolicy>) -> Self {
        self.pooled = PooledTransports::with_policy(policy.clone());
        self.egress_policy = policy;
        self
    }

    /// The Kafka and Redis clients of this process, shared by the built-in transports and the
    /// plugins' `kafka` and `redis-streams` imports.
    pub fn pooled(&self) -> &PooledTransports {
        &self.pooled
    }

    /// Forget cached versions whenever another process installs or removes a plugin (where the
    /// database can tell). Called once at start-up.
    pub async fn follow_changes(&self) {
        let wake = Arc::new(tokio::sync::Notify::new());
        match self.store.listen(&[(Signal::PluginsChanged, wake.clone())]).await {
            Ok(true) => {
                let newest = self.newest.clone();
                tokio::spawn(async move {
                    loop {
                        wake.notified().await;
                        newest.generation.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, "Could not LISTEN for plugin changes; cached versions expire instead.")
            }
        }
    }

    /// A version was installed or removed here: forget cached versions in this process and
    /// tell the others.
    pub async fn versions_changed(&self) {
        self.newest.generation.fetch_add(1, Ordering::SeqCst);
        if let Err(error) = self.store.signal(Signal::PluginsChanged).await {
            tracing::warn!(%error, "Could not notify other processes of a plugin change; their caches expire within a second.");
        }
    }

    /// The newest version of `name`, ready to call.
    pub async fn latest(&self, name: &str) -> Result<Arc<ReadyPlugin>, PluginError> {
        self.get(&PluginRef { name: name.to_owned(), version: None }).await
    }

    /// The version `plugin` names (the newest when it names none), ready to call.
    pub async fn get(&self, plugin: &PluginRef) -> Result<Arc<ReadyPlugin>, PluginError> {
        let name = plugin.name.as_str();
        let generation = self.newest.generation.load(Ordering::SeqCst);
        let cached = self.newest.entries.lock().expect("plugin versions lock").get(plugin).map(|c| {
            let fresh = c.generation == generation && c.fetched.elapsed() < NEWEST_VERSION_TTL;
            (fresh, c.ready.clone())
        });
        if let Some((true, ready)) = cached {
            return Ok(ready);
        }
        let store_error = |source| PluginError::Store { name: name.to_owned(), source };
        let record = match plugin.version {
            None => self.store.plugin_latest(name).await.map_err(store_error)?,
            Some(version) => {
                self.store.plugin_versions(name).await.map_err(store_error)?.into_iter().find(|r| r.version == version)
            }
        }
        .ok_or_else(|| PluginError::NotInstalled(plugin.to_string()))?;
        // The same version as before: keep it, with its spare instance and its connections.
        if let Some((_, ready)) = cached.filter(|(_, ready)| same_version(&ready.record, &record)) {
            self.remember(plugin, &ready, generation);
            return Ok(ready);
        }
        let loaded = match self.runtime.load(&record.sha256, || None) {
            Ok(loaded) => loaded,
            Err(_) => {
                let bytes = self
                    .store
                    .plugin_bytes(&record.name, record.version)
                    .await
                    .map_err(|source| PluginError::Store { name: name.to_owned(), source })?;
                self.runtime.load(&record.sha256, || bytes)?
            }
        };
        let ready = Arc::new(ReadyPlugin {
            id: NEXT_READY_ID.fetch_add(1, Ordering::Relaxed),
            egress: Arc::new(
                Egress::with_policy(Arc::new(grants_of(&record)), self.egress_policy.clone())
                    .with_pooled(self.pooled.clone()),
            ),
            limits: serde_json::from_value(record.limits.clone()).unwrap_or_default(),
            record,
            loaded,
            spare: Arc::default(),
        });
        self.remember(plugin, &ready, generation);
        Ok(ready)
    }

    /// Cache `ready` under the generation read before it was looked up: a change heard of
    /// meanwhile makes the entry stale at once.
    fn remember(&self, plugin: &PluginRef, ready: &Arc<ReadyPlugin>, generation: u64) {
        self.newest
            .entries
            .lock()
            .expect("plugin versions lock")
            .insert(plugin.clone(), CachedVersion { ready: ready.clone(), generation, fetched: Instant::now() });
    }
}

/// Whether two records are one installed version (a reinstall after removal may reuse the number).
fn same_version(a: &PluginRecord, b: &PluginRecord) -> bool {
    a.version == b.version && a.sha256 == b.sha256 && a.grants == b.grants && a.limits == b.limits
}

/// The grants as installed (checked then, so a pattern that no longer parses grants nothing).
fn grants_of(record: &PluginRecord) -> Grants {
    let texts: Vec<String> = serde_json::from_value(record.grants.clone()).unwrap_or_default();
    Grants::parse(&texts).unwrap_or_default()
}
