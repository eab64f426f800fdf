//! The plugin runtime: one wasmtime engine (component model, async, pooling allocator, epoch
//! interruption), the linker of what the host offers, and a cache of pre-instantiated
//! components by sha256. Each call gets a fresh `Store` from the cached `InstancePre`, so a
//! plugin keeps no state between calls and a new version applies to the next call.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline};

use super::error::PluginError;
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::sandbox::{CallLogs, PluginState};
use crate::contract::{host_imports, Failure, Message, Receipt, RenderError, RendererPlugin, TransportPlugin};

/// How often the engine's epoch advances; a call's CPU deadline is counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Time a call may take to validate a spec at registration.
pub const VALIDATE_TIMEOUT: Duration = Duration::from_secs(5);
/// Per pooled memory and table, how much is reset in place rather than returned to the kernel.
const KEEP_RESIDENT_BYTES: usize = 4 * 1024 * 1024;
/// Plugin calls that may run at once in one process (the pooling allocator's slots).
const MAX_CONCURRENT_INSTANCES: u32 = 128;
/// Finished calls' stores kept for later calls to return to the pool.
const MAX_RETIRED: usize = 8;

pub const TRANSPORT_EXPORT: &str = "taskexec:plugin/transport@0.1.0";
pub const RENDERER_EXPORT: &str = "taskexec:plugin/renderer@0.1.0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Transport,
    Renderer,
}

impl World {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport-plugin",
            Self::Renderer => "renderer-plugin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "transport-plugin" => Some(Self::Transport),
            "renderer-plugin" => Some(Self::Renderer),
            _ => None,
        }
    }
}

/// What a component is, found by compiling and type-checking it.
#[derive(Debug, Clone)]
pub struct Inspection {
    pub world: World,
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// A component ready to instantiate.
pub enum Loaded {
    Transport(wasmtime_ready::TransportPre),
    Renderer(wasmtime_ready::RendererPre),
}

mod wasmtime_ready {
    use super::PluginState;
    pub type TransportPre = crate::contract::TransportPluginPre<PluginState>;
    pub type RendererPre = crate::contract::RendererPluginPre<PluginState>;
}

/// The outcome of one call, with what the plugin logged and tried.
pub struct CallOutcome<T> {
    pub result: T,
    pub logs: CallLogs,
    pub denials: Vec<String>,
    /// The call trapped or ran past its deadline (not a failure the plugin returned).
    pub trapped: bool,
}

pub struct PluginRuntime {
    engine: Engine,
    linker: Linker<PluginState>,
    loaded: RwLock<HashMap<String, Arc<Loaded>>>,
    cache_dir: Option<PathBuf>,
    pub memory_mb_max: u32,
    /// For calls that may send nothing (validate, render).
    no_egress: Arc<Egress>,
    /// One permit per instance slot of the pooling allocator, held for as long as a store
    /// lives: calls beyond the pool wait for a slot instead of failing, and spares are made
    /// only from slots nobody waits for.
    instances: Arc<Semaphore>,
    /// Finished calls' stores, for the next call's upkeep to return to the pool.
    retired: Mutex<Vec<RetiredStore>>,
}

impl PluginRuntime {
    pub fn new(cache_dir: Option<PathBuf>, memory_mb_max: u32) -> Result<Arc<Self>, PluginError> {
        Self::build(cache_dir, memory_mb_max).map_err(|e| PluginError::Runtime(format!("{e:#}")))
    }

    fn build(cache_dir: Option<PathBuf>, memory_mb_max: u32) -> wasmtime::Result<Arc<Self>> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_CONCURRENT_INSTANCES)
            .total_core_instances(4 * MAX_CONCURRENT_INSTANCES)
            .total_memories(4 * MAX_CONCURRENT_INSTANCES)
            .total_tables(4 * MAX_CONCURRENT_INSTANCES)
            .max_memory_size(memory_mb_max as usize * 1024 * 1024)
            // Reset a slot for reuse by rewriting only the pages the last call dirtied (found
            // with PAGEMAP_SCAN where the kernel has it, Linux 6.7+) instead of madvise: each
            // madvise shoots down TLBs on every core the process runs on, which the profile of
            // a plugin delivery showed as the largest kernel cost (~14% of all CPU).
            .pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_BYTES);
        let mut config = Config::new();
        // Async support is implied by the async instantiation and calls below.
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let ticker = engine.weak();
        std::thread::Builder::new().name("plugin-epoch".into()).spawn(move || {
            while let Some(engine) = ticker.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        // wasi:http's types are wasmtime-wasi-http's; its outgoing handler is ours (see outbound).
        let http_options = wasmtime_wasi_http::p2::bindings::LinkOptions::default();
        wasmtime_wasi_http::p2::bindings::http::types::add_to_linker::<_, wasmtime_wasi_http::WasiHttp>(
            &mut linker,
            &(&http_options).into(),
            <PluginState as wasmtime_wasi_http::WasiHttpView>::http,
        )?;
        super::wasi_http::add_to_linker(&mut linker)?;
        host_imports::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
        if let Some(dir) = &cache_dir {
            std::fs::create_dir_all(dir)?;
            // Cached artifacts are loaded without validation: the directory must be ours alone.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Arc::new(Self {
            engine,
            linker,
            loaded: RwLock::default(),
            cache_dir,
            memory_mb_max,
            no_egress: Arc::new(Egress::none()),
            instances: Arc::new(Semaphore::new(MAX_CONCURRENT_INSTANCES as usize)),
            retired: Mutex::default(),
        }))
    }

    fn compile(&self, bytes: &[u8]) -> Result<Component, PluginError> {
        if bytes.len() >= 8 && &bytes[..4] == b"\0asm" && bytes[4..8] == [1, 0, 0, 0] {
            return Err("this is a core WebAssembly module, not a component: build for wasm32-wasip2 (cargo build --target wasm32-wasip2), or wrap it with `wasm-tools component new`".into());
        }
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            return Err("this is not WebAssembly (no \\0asm header)".into());
        }
        Component::new(&self.engine, bytes)
            .map_err(|e| PluginError::Invalid(format!("the component does not compile: {e:#}")))
    }

    /// Compile and type-check `bytes`: the world it exports, and that every import is one the
    /// host offers. `claimed` (when given) must be that world.
    pub fn inspect(&self, bytes: &[u8], claimed: Option<World>) -> Result<(Inspection, Component), PluginError> {
        let component = self.compile(bytes)?;
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(name, _)| name.to_owned()).collect();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(name, _)| name.to_owned()).collect();
        let world = if exports.iter().any(|e| e == TRANSPORT_EXPORT) {
            World::Transport
        } else if exports.iter().any(|e| e == RENDERER_EXPORT) {
            World::Renderer
        } else {
            return Err(PluginError::Invalid(format!(
                "the component exports neither {TRANSPORT_EXPORT} nor {RENDERER_EXPORT} (it exports: {}); generate its bindings from transports-wit with world transport-plugin or renderer-plugin",
                if exports.is_empty() { "nothing".to_owned() } else { exports.join(", ") }
            )));
        };
        if let Some(claimed) = claimed {
            if claimed != world {
                return Err(PluginError::Invalid(format!(
                    "the component implements {}, not the claimed {}",
                    world.as_str(),
                    claimed.as_str()
                )));
            }
        }
        let pre = self.linker.instantiate_pre(&component).map_err(|e| {
            format!("the component needs an import the host does not offer ({e:#}); plugins may import only taskexec:plugin/host, WASI 0.2 and wasi:http/outgoing-handler")
        })?;
        match world {
            World::Transport => drop(
                crate::contract::TransportPluginPre::new(pre)
                    .map_err(|e| format!("the transport export does not match the WIT contract: {e:#}"))?,
            ),
            World::Renderer => drop(
                crate::contract::RendererPluginPre::new(pre)
                    .map_err(|e| format!("the renderer export does not match the WIT contract: {e:#}"))?,
            ),
        }
        Ok((Inspection { world, exports, imports }, component))
    }

    /// The ready-to-instantiate component for `sha256`, from memory, the artifact cache, or by
    /// compiling `bytes()` (fetched only when needed).
    pub fn load(&self, sha256: &str, bytes: impl FnOnce() -> Option<Vec<u8>>) -> Result<Arc<Loaded>, PluginError> {
        if let Some(loaded) = self.loaded.read().expect("plugin cache lock").get(sha256) {
            return Ok(loaded.clone());
        }
        let artifact = self.cache_dir.as_ref().map(|dir| {
            let engine_hash = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                self.engine.precompile_compatibility_hash().hash(&mut h);
                h.finish()
            };
            dir.join(format!("{sha256}-{engine_hash:016x}.cwasm"))
        });
        // SAFETY: artifacts are written only by this service, into a 0700 directory, named by
        // the sha256 of their source and the engine's compatibility hash.
        let cached = artifact
            .as_ref()
            .filter(|p| p.exists())
            .and_then(|p| unsafe { Component::deserialize_file(&self.engine, p) }.ok());
        let component = match cached {
            Some(component) => component,
            None => {
                let bytes = bytes().ok_or("the plugin's bytes are missing")?;
                let (_, component) = self.inspect(&bytes, None)?;
                if let (Some(path), Ok(serialized)) = (&artifact, component.serialize()) {
                    let tmp = path.with_extension("tmp");
                    if std::fs::write(&tmp, serialized).is_ok() {
                        let _ = std::fs::rename(&tmp, path);
                    }
                }
                component
            }
        };
        let pre = self.linker.instantiate_pre(&component).map_err(|e| format!("{e:#}"))?;
        let exports_transport =
            component.component_type().exports(&self.engine).any(|(name, _)| name == TRANSPORT_EXPORT);
        let loaded = Arc::new(if exports_transport {
            Loaded::Transport(crate::contract::TransportPluginPre::new(pre).map_err(|e| format!("{e:#}"))?)
        } else {
            Loaded::Renderer(crate::contract::RendererPluginPre::new(pre).map_err(|e| format!("{e:#}"))?)
        });
        self.loaded.write().expect("plugin cache lock").insert(sha256.to_owned(), loaded.clone());
        Ok(loaded)
    }

    fn store(&self, limits: &PluginLimits, cpu: Duration) -> Store<PluginState> {
        new_store(&self.engine, self.no_egress.clone(), limits, cpu)
    }

    /// Run `transport.deliver` in a fresh instance: the CPU deadline is `timeout` (epoch
    /// interruption), and the host stops waiting at `timeout` plus a second (wall clock).
    ///
    /// The instance is `spare`'s when one is ready, and the next spare is made while this call
    /// waits on the network (see `upkeep`), so a call rarely pays for instantiation.
    pub async fn deliver(
        &self,
        loaded: &Arc<Loaded>,
        spare: &Arc<SpareInstance>,
        egress: &Arc<Egress>,
        limits: &PluginLimits,
        message: Message,
        timeout: Duration,
    ) -> CallOutcome<Result<Receipt, Failure>> {
        let Loaded::Transport(pre) = &**loaded else {
            return outcome_without_call(Err(Failure::invalid_spec("this plugin is a renderer, not a transport")));
        };
        if message.spec_json.len() > limits.max_io_bytes as usize {
            return outcome_without_call(Err(Failure::invalid_spec(format!(
                "the rendered spec is larger than the plugin's {} byte limit",
                limits.max_io_bytes
            ))));
        }
        let taken = spare.ready.lock().expect("spare instance lock").take();
        let (mut store, plugin, slot) = match taken {
            Some(instance) => instance,
            None => {
                let slot = self.instance_slot().await;
                match instantiate_transport(&self.engine, pre, egress.clone(), limits).await {
                    (store, Ok(plugin)) => (store, plugin, slot),
                    (mut store, Err(failure)) => {
                        return CallOutcome { trapped: true, ..finish_call(&mut store, Err(failure)) }
                    }
                }
            }
        };
        let refill = self.claim_refill(spare);
        arm_cpu_deadline(&mut store, timeout);
        store.data_mut().outbound.set_deadline(std::time::Instant::now() + timeout);
        let call = plugin.taskexec_plugin_transport().call_deliver(&mut store, &message);
        let call = tokio::time::timeout(timeout + Duration::from_secs(1), call);
        let answered = while_waiting(call, self.upkeep(refill, pre, egress, limits)).await;
        let trapped = matches!(answered, Err(_) | Ok(Err(_)));
        let result = match answered {
            Err(_) => Err(Failure::timeout(format!(
                "the plugin did not return within {} ms (wall clock)",
                timeout.as_millis()
            ))),
            Ok(Err(trap)) => Err(trap_failure(&trap, timeout)),
            Ok(Ok(Ok(receipt))) if receipt.output_json.len() > limits.max_io_bytes as usize => Err(Failure::internal(
                false,
                format!("the plugin's output is larger than its {} byte limit", limits.max_io_bytes),
            )),
            Ok(Ok(result)) => result.map_err(|mut f| {
                f.message = f.message.chars().take(4096).collect();
                f
            }),
        };
        let outcome = CallOutcome { trapped, ..finish_call(&mut store, result) };
        self.retire(store, slot);
        outcome
    }

    /// The upkeep a call does while it waits on the network: return the slots of finished
    /// calls to the pool (which resets their memory) and make the next spare instance.
    ///
    /// Done on the call's own task rather than a spawned one: on an idle runtime a spawned
    /// task wakes another worker thread, and with it another core, for every delivery.
    async fn upkeep(
        &self,
        refill: Option<RefillClaim>,
        pre: &wasmtime_ready::TransportPre,
        egress: &Arc<Egress>,
        limits: &PluginLimits,
    ) {
        // First let the request the call has just handed to its connection go out.
        tokio::task::yield_now().await;
        let finished = std::mem::take(&mut *self.retired.lock().expect("retired stores lock"));
        drop(finished);
        if let Some(mut claim) = refill {
            if let (store, Ok(plugin)) = instantiate_transport(&self.engine, pre, egress.clone(), limits).await {
                let slot = claim.slot.take().expect("a claim has its slot until used");
                *claim.spare.ready.lock().expect("spare instance lock") = Some((store, plugin, slot));
            }
        }
    }

    /// A finished call's store: kept for the next call's upkeep to drop, or dropped in the
    /// background when slots are short (a retired store holds its slot until then). It is never
    /// run again; an idle runtime keeps the last one until its next call.
    fn retire(&self, store: Store<PluginState>, slot: OwnedSemaphorePermit) {
        let plenty = self.instances.available_permits() > MAX_CONCURRENT_INSTANCES as usize / 2;
        let mut retired = self.retired.lock().expect("retired stores lock");
        if plenty && retired.len() < MAX_RETIRED {
            retired.push((store, slot));
        } else {
            drop(retired);
            tokio::spawn(async move {
                drop(store);
                drop(slot);
            });
        }
    }

    /// Claim the making of `spare`'s next instance and a slot for it, unless a refill is under
    /// way or slots are short. Claimed as the call starts, made by its `upkeep`.
    fn claim_refill(&self, spare: &Arc<SpareInstance>) -> Option<RefillClaim> {
        if spare.refilling.swap(true, Ordering::AcqRel) {
            return None;
        }
        let mut claim = RefillClaim { spare: spare.clone(), slot: None };
        // Only a slot free right now, and only while half the pool is free: an idle spare keeps
        // its slot, so spares of many plugins must never crowd out the calls themselves.
        let plenty = self.instances.available_permits() > MAX_CONCURRENT_INSTANCES as usize / 2;
        claim.slot = Some(plenty.then(|| self.instances.clone().try_acquire_owned().ok()).flatten()?);
        Some(claim)
    }

    /// Instance slots neither a call, a spare nor a retired store holds.
    pub fn free_slots(&self) -> usize {
        self.instances.available_permits()
    }

    /// A permit for one instance slot, waiting for one to be free.
    async fn instance_slot(&self) -> OwnedSemaphorePermit {
        self.instances.clone().acquire_owned().await.expect("the instance semaphore is never closed")
    }

    /// Run `transport.validate` for an endpoint spec at registration.
    pub async fn validate(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        spec_json: String,
    ) -> Result<Result<(), String>, PluginError> {
        let Loaded::Transport(pre) = loaded else {
            return Err(PluginError::WrongWorld { actual: "renderer", expected: "transport" });
        };
        let _slot = self.instance_slot().await;
        let mut store = self.store(limits, VALIDATE_TIMEOUT);
        let call = async {
            let plugin = pre.instantiate_async(&mut store).await?;
            plugin.taskexec_plugin_transport().call_validate(&mut store, &spec_json).await
        };
        match tokio::time::timeout(VALIDATE_TIMEOUT + Duration::from_secs(1), call).await {
            Err(_) => Err(PluginError::Call("the plugin's validate did not return in time".into())),
            Ok(Err(trap)) => Err(PluginError::Call(trap_failure(&trap, VALIDATE_TIMEOUT).message)),
            Ok(Ok(result)) => Ok(result),
        }
    }

    /// Run `renderer.render` (or `check` when `context_json` is None).
    pub async fn render(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        template_json: String,
        context_json: Option<String>,
    ) -> Result<String, RenderError> {
        let Loaded::Renderer(pre) = loaded else {
            return Err(RenderError::new("this plugin is a transport, not a renderer", None));
        };
        let _slot = self.instance_slot().await;
        let mut store = self.store(limits, VALIDATE_TIMEOUT);
        let call = async {
            let plugin: RendererPlugin = pre.instantiate_async(&mut store).await?;
            let renderer = plugin.taskexec_plugin_renderer();
            match &context_json {
                Some(context) => renderer.call_render(&mut store, &template_json, context).await,
                None => renderer.call_check(&mut store, &template_json).await.map(|r| r.map(|()| String::new())),
            }
        };
        match tokio::time::timeout(VALIDATE_TIMEOUT + Duration::from_secs(1), call).await {
            Err(_) => Err(RenderError::new("the renderer plugin did not return in time", None)),
            Ok(Err(trap)) => Err(RenderError::new(trap_failure(&trap, VALIDATE_TIMEOUT).message, None)),
            Ok(Ok(result)) => result,
        }
    }
}

/// A fresh store for one call. The CPU deadline is counted in epoch ticks the guest runs
/// through: at each tick the call yields to other calls on its thread, and once `cpu` worth of
/// ticks have passed it is interrupted (a trap).
fn new_store(engine: &Engine, egress: Arc<Egress>, limits: &PluginLimits, cpu: Duration) -> Store<PluginState> {
    let mut store = Store::new(engine, PluginState::new(egress, limits));
    store.limiter(|state| &mut state.limits);
    arm_cpu_deadline(&mut store, cpu);
    store
}

/// Give the store's guest `cpu` worth of epoch ticks from now, yielding at each.
fn arm_cpu_deadline(store: &mut Store<PluginState>, cpu: Duration) {
    let budget = (cpu.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1;
    let mut ticks = 0;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        ticks += 1;
        Ok(if ticks >= budget { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
}

/// A fresh store and instance of a transport plugin. Instantiation runs no guest code but a
/// start function, which gets the validation budget of CPU and wall-clock time.
async fn instantiate_transport(
    engine: &Engine,
    pre: &crate::contract::TransportPluginPre<PluginState>,
    egress: Arc<Egress>,
    limits: &PluginLimits,
) -> (Store<PluginState>, Result<TransportPlugin, Failure>) {
    let mut store = new_store(engine, egress, limits, VALIDATE_TIMEOUT);
    let started = std::time::Instant::now();
    let instantiated =
        tokio::time::timeout(VALIDATE_TIMEOUT + Duration::from_secs(1), pre.instantiate_async(&mut store)).await;
    crate::metrics::plugin_instantiated(started.elapsed());
    let made = match instantiated {
        Err(_) => Err(Failure::timeout("the plugin did not finish instantiating in time")),
        Ok(Err(trap)) => Err(trap_failure(&trap, VALIDATE_TIMEOUT)),
        Ok(Ok(plugin)) => Ok(plugin),
    };
    (store, made)
}

/// A finished call's store and the slot it holds until dropped.
type RetiredStore = (Store<PluginState>, OwnedSemaphorePermit);

/// The sole right to make a spare's next instance, and the slot it goes in. Dropped — the
/// instance made or not, even when the call making it is cancelled — it lets the next call try.
struct RefillClaim {
    spare: Arc<SpareInstance>,
    slot: Option<OwnedSemaphorePermit>,
}

impl Drop for RefillClaim {
    fn drop(&mut self) {
        self.spare.refilling.store(false, Ordering::Release);
    }
}

/// Poll `call`, and while it waits, `upkeep`; a call that finishes first (one that never waited
/// long) then finishes the upkeep, so the next call still finds a spare.
async fn while_waiting<T>(call: impl Future<Output = T>, upkeep: impl Future<Output = ()>) -> T {
    let mut call = std::pin::pin!(call);
    let mut upkeep = std::pin::pin!(upkeep);
    let mut upkept = false;
    let result = std::future::poll_fn(|cx| {
        if let Poll::Ready(result) = call.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        if !upkept {
            upkept = upkeep.as_mut().poll(cx).is_ready();
        }
        Poll::Pending
    })
    .await;
    if !upkept {
        upkeep.await;
    }
    result
}

/// A fresh instance of one transport plugin version, made before a call needs it. It is never
/// called before it is handed out, so each call still runs in a store and instance of its own.
#[derive(Default)]
pub struct SpareInstance {
    ready: Mutex<Option<(Store<PluginState>, TransportPlugin, OwnedSemaphorePermit)>>,
    refilling: AtomicBool,
}

fn outcome_without_call<T>(result: T) -> CallOutcome<T> {
    CallOutcome { result, logs: CallLogs::default(), denials: Vec::new(), trapped: false }
}

fn finish_call<T>(store: &mut Store<PluginState>, result: T) -> CallOutcome<T> {
    let state = store.data_mut();
    state.collect_output();
    let denials = state.outbound.denials();
    let logs = std::mem::take(&mut state.logs);
    CallOutcome { result, logs, denials, trapped: false }
}

/// A trap, described for the attempt's error. Retryable: whether a retry helps is for the
/// endpoint's policy to bound, and a plugin that traps every time exhausts it.
fn trap_failure(error: &wasmtime::Error, cpu: Duration) -> Failure {
    let text = format!("{error:#}");
    match error.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => {
            Failure::timeout(format!("the plugin exceeded its CPU deadline of {} ms and was stopped", cpu.as_millis()))
        }
        Some(wasmtime::Trap::UnreachableCodeReached) => {
            Failure::internal(true, format!("the plugin trapped (a panic or abort): {text}"))
        }
        _ if text.contains("memory") && (text.contains("grow") || text.contains("limit")) => {
            Failure::internal(true, format!("the plugin exceeded its memory limit: {text}"))
        }
        _ => Failure::internal(true, format!("the plugin trapped: {text}")),
    }
}
