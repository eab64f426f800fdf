//! The wasmtime engine plugins run on: component model, async, the pooling allocator and epoch
//! interruption; the linker of what the host offers; compiling and type-checking a component;
//! and a fresh store per call with its CPU deadline.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, UpdateDeadline};

use super::error::PluginError;
use super::instances::MAX_CONCURRENT_INSTANCES;
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::sandbox::PluginState;
use crate::contract::{
    host_imports, http_client_imports, kafka_imports, redis_stream_imports, specs, ClassifierPluginPre, Failure,
    RendererPluginPre, SchedulePluginPre, TransportPluginPre,
};

/// How often the engine's epoch advances; a call's CPU deadline is counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Per pooled memory and table, how much is reset in place rather than returned to the kernel.
const KEEP_RESIDENT_BYTES: usize = 4 * 1024 * 1024;

pub const TRANSPORT_EXPORT: &str = "taskexec:plugin/transport@0.1.0";
pub const RENDERER_EXPORT: &str = "taskexec:plugin/renderer@0.1.0";
pub const CLASSIFIER_EXPORT: &str = "taskexec:plugin/classifier@0.1.0";
pub const SCHEDULE_EXPORT: &str = "taskexec:plugin/schedule@0.1.0";

/// The WIT world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    Transport,
    Renderer,
    Classifier,
    Schedule,
}

impl World {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transport => "transport-plugin",
            Self::Renderer => "renderer-plugin",
            Self::Classifier => "classifier-plugin",
            Self::Schedule => "schedule-plugin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "transport-plugin" => Some(Self::Transport),
            "renderer-plugin" => Some(Self::Renderer),
            "classifier-plugin" => Some(Self::Classifier),
            "schedule-plugin" => Some(Self::Schedule),
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
    Transport(TransportPluginPre<PluginState>),
    Renderer(RendererPluginPre<PluginState>),
    Classifier(ClassifierPluginPre<PluginState>),
    Schedule(SchedulePluginPre<PluginState>),
}

impl Loaded {
    pub fn world(&self) -> World {
        match self {
            Self::Transport(_) => World::Transport,
            Self::Renderer(_) => World::Renderer,
            Self::Classifier(_) => World::Classifier,
            Self::Schedule(_) => World::Schedule,
        }
    }
}

/// The engine and the linker every plugin call shares.
pub(super) struct PluginEngine {
    engine: Engine,
    linker: Linker<PluginState>,
}

impl PluginEngine {
    pub(super) fn new(memory_mb_max: u32) -> wasmtime::Result<Self> {
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
        // Async support is implied by the async instantiation and calls.
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // For profiling plugins: `perf` finds the names of compiled guest functions in
        // /tmp/perf-PID.map (otherwise guest code shows as unknown addresses).
        if std::env::var_os("TE_PLUGIN_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
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
        http_client_imports::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
        specs::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
        kafka_imports::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
        redis_stream_imports::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |state| state)?;
        Ok(Self { engine, linker })
    }

    /// What artifacts compiled by this engine must match to be loaded again.
    pub(super) fn compatibility_hash(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        h.finish()
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

    /// A component compiled earlier by an engine with the same compatibility hash.
    ///
    /// # Safety
    /// `path` must hold an artifact this service wrote (it is loaded without validation).
    pub(super) unsafe fn deserialize(&self, path: &std::path::Path) -> Option<Component> {
        unsafe { Component::deserialize_file(&self.engine, path) }.ok()
    }

    /// Compile and type-check `bytes`: the world it exports, and that every import is one the
    /// host offers. `claimed` (when given) must be that world.
    pub(super) fn inspect(&self, bytes: &[u8], claimed: Option<World>) -> Result<(Inspection, Component), PluginError> {
        let component = self.compile(bytes)?;
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(name, _)| name.to_owned()).collect();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(name, _)| name.to_owned()).collect();
        let Some(world) = world_of(&exports) else {
            return Err(PluginError::Invalid(format!(
                "the component exports none of {TRANSPORT_EXPORT}, {RENDERER_EXPORT}, {CLASSIFIER_EXPORT} or {SCHEDULE_EXPORT} (it exports: {}); generate its bindings from transports-wit with world transport-plugin, renderer-plugin, classifier-plugin or schedule-plugin",
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
            format!("the component needs an import the host does not offer ({e:#}); plugins may import only taskexec:plugin/host, …/http-client, …/specs, …/kafka, …/redis-streams, WASI 0.2 and wasi:http/outgoing-handler")
        })?;
        match world {
            World::Transport => drop(
                TransportPluginPre::new(pre)
                    .map_err(|e| format!("the transport export does not match the WIT contract: {e:#}"))?,
            ),
            World::Renderer => drop(
                RendererPluginPre::new(pre)
                    .map_err(|e| format!("the renderer export does not match the WIT contract: {e:#}"))?,
            ),
            World::Classifier => drop(
                ClassifierPluginPre::new(pre)
                    .map_err(|e| format!("the classifier export does not match the WIT contract: {e:#}"))?,
            ),
            World::Schedule => drop(
                SchedulePluginPre::new(pre)
                    .map_err(|e| format!("the schedule export does not match the WIT contract: {e:#}"))?,
            ),
        }
        Ok((Inspection { world, exports, imports }, component))
    }

    /// Link a component that has passed [`inspect`](Self::inspect) once, ready to instantiate.
    pub(super) fn prepare(&self, component: &Component) -> Result<Loaded, PluginError> {
        let pre = self.linker.instantiate_pre(component).map_err(|e| format!("{e:#}"))?;
        let exports: Vec<String> =
            component.component_type().exports(&self.engine).map(|(name, _)| name.to_owned()).collect();
        let typed = |e: wasmtime::Error| PluginError::from(format!("{e:#}"));
        Ok(match world_of(&exports) {
            Some(World::Transport) => Loaded::Transport(TransportPluginPre::new(pre).map_err(typed)?),
            Some(World::Renderer) => Loaded::Renderer(RendererPluginPre::new(pre).map_err(typed)?),
            Some(World::Classifier) => Loaded::Classifier(ClassifierPluginPre::new(pre).map_err(typed)?),
            Some(World::Schedule) => Loaded::Schedule(SchedulePluginPre::new(pre).map_err(typed)?),
            None => return Err("the component exports no world the host calls".into()),
        })
    }

    /// A fresh store for one call. The CPU deadline is counted in epoch ticks the guest runs
    /// through: at each tick the call yields to other calls on its thread, and once `cpu` worth
    /// of ticks have passed it is interrupted (a trap).
    pub(super) fn store(&self, egress: Arc<Egress>, limits: &PluginLimits, cpu: Duration) -> Store<PluginState> {
        let mut store = Store::new(&self.engine, PluginState::new(egress, limits));
        store.limiter(|state| &mut state.limits);
        arm_cpu_deadline(&mut store, cpu);
        store
    }
}

/// The world a component's exports implement.
fn world_of(exports: &[String]) -> Option<World> {
    let exports = |name: &str| exports.iter().any(|e| e == name);
    if exports(TRANSPORT_EXPORT) {
        Some(World::Transport)
    } else if exports(RENDERER_EXPORT) {
        Some(World::Renderer)
    } else if exports(CLASSIFIER_EXPORT) {
        Some(World::Classifier)
    } else if exports(SCHEDULE_EXPORT) {
        Some(World::Schedule)
    } else {
        None
    }
}

/// Give the store's guest `cpu` worth of epoch ticks from now, yielding at each.
pub(super) fn arm_cpu_deadline(store: &mut Store<PluginState>, cpu: Duration) {
    let budget = (cpu.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64 + 1;
    let mut ticks = 0;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        ticks += 1;
        Ok(if ticks >= budget { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
}

/// A trap, described for the attempt's error. Retryable: whether a retry helps is for the
/// endpoint's policy to bound, and a plugin that traps every time exhausts it.
pub(super) fn trap_failure(error: &wasmtime::Error, cpu: Duration) -> Failure {
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
