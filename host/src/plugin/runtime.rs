//! The plugin runtime: the calls the host makes into plugins, each in a fresh store from a
//! cached, pre-linked component, so a plugin keeps no state between calls and a new version
//! applies to the next call — except deliveries of a transport plugin installed with
//! `calls_per_instance` above 1, which may share an instance within one endpoint version.
//! Built from the engine (`engine.rs`: wasmtime, the linker, the CPU deadline), the artifact
//! cache (`artifacts.rs`) and the instance pool (`instances.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;
use wasmtime::Store;

use super::artifacts::ArtifactCache;
use super::engine::{arm_cpu_deadline, trap_failure, Inspection, Loaded, PluginEngine, World};
use super::error::PluginError;
use super::instances::{while_waiting, InstancePool, ReuseScope, SpareInstance, VALIDATE_TIMEOUT};
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::sandbox::{CallLogs, PluginState};
use crate::contract::{
    Answer, ClassifierPlugin, Failure, LocalTime, Message, Receipt, RenderError, RendererPlugin, SchedulePlugin,
    Verdict,
};

/// The outcome of one call, with what the plugin logged and tried.
pub struct CallOutcome<T> {
    pub result: T,
    pub logs: CallLogs,
    pub denials: Vec<String>,
    /// Destinations (`scheme://host:port`) refused because the plugin has no grant for them.
    pub ungranted: Vec<String>,
    /// The call trapped or ran past its deadline (not a failure the plugin returned).
    pub trapped: bool,
    /// The call ran in an instance an earlier call of its reuse scope made.
    pub reused: bool,
}

pub struct PluginRuntime {
    engine: PluginEngine,
    artifacts: ArtifactCache,
    instances: InstancePool,
    pub memory_mb_max: u32,
    /// For calls that may send nothing (validate, render).
    no_egress: Arc<Egress>,
}

/// The plugin memory budget when `TE_PLUGIN_MEMORY_TOTAL_MB` is not set: a quarter of the
/// machine's memory (`MemTotal`), at least 256 MiB; 4 GiB where the machine does not say.
pub fn default_memory_total_mb() -> u32 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|info| {
        info.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    match total_kib {
        Some(kib) => u32::try_from(kib / 1024 / 4).unwrap_or(u32::MAX).max(256),
        None => 4096,
    }
}

impl PluginRuntime {
    pub fn new(cache_dir: Option<PathBuf>, memory_mb_max: u32) -> Result<Arc<Self>, PluginError> {
        Self::with_memory_total(cache_dir, memory_mb_max, default_memory_total_mb())
    }

    /// A runtime whose plugin instances may use `memory_total_mb` MiB of linear memory together
    /// (`TE_PLUGIN_MEMORY_TOTAL_MB`).
    pub fn with_memory_total(
        cache_dir: Option<PathBuf>,
        memory_mb_max: u32,
        memory_total_mb: u32,
    ) -> Result<Arc<Self>, PluginError> {
        let engine = PluginEngine::new(memory_mb_max).map_err(|e| PluginError::Runtime(format!("{e:#}")))?;
        let artifacts = ArtifactCache::new(cache_dir)
            .map_err(|e| PluginError::Runtime(format!("the plugin artifact directory: {e}")))?;
        Ok(Arc::new(Self {
            engine,
            artifacts,
            instances: InstancePool::new(memory_total_mb),
            memory_mb_max,
            no_egress: Arc::new(Egress::none()),
        }))
    }

    /// Compile and type-check `bytes`: the world it exports, and that every import is one the
    /// host offers. `claimed` (when given) must be that world.
    pub fn inspect(&self, bytes: &[u8], claimed: Option<World>) -> Result<(Inspection, Component), PluginError> {
        self.engine.inspect(bytes, claimed)
    }

    /// The ready-to-instantiate component for `sha256`, from memory, the artifact cache, or by
    /// compiling `bytes()` (fetched only when needed).
    pub fn load(&self, sha256: &str, bytes: impl FnOnce() -> Option<Vec<u8>>) -> Result<Arc<Loaded>, PluginError> {
        self.artifacts.load(&self.engine, sha256, bytes)
    }

    /// Instance slots neither a call, a spare nor a retired store holds.
    pub fn free_slots(&self) -> usize {
        self.instances.free_slots()
    }

    /// Instances parked for their scope's next delivery.
    pub fn parked_instances(&self) -> usize {
        self.instances.parked()
    }

    /// Run `transport.deliver` in a fresh instance: the CPU deadline is `timeout` (epoch
    /// interruption), and the host stops waiting at `timeout` plus a second (wall clock).
    ///
    /// The instance is `spare`'s when one is ready, and the next spare is made while this call
    /// waits on the network (the instance pool's upkeep), so a call rarely pays for
    /// instantiation. With a `reuse` scope (a plugin installed with `calls_per_instance` above
    /// 1), the instance is one parked by an earlier delivery of that scope when there is one,
    /// and is parked again after a call that returned.
    #[allow(clippy::too_many_arguments)]
    pub async fn deliver(
        &self,
        loaded: &Arc<Loaded>,
        spare: &Arc<SpareInstance>,
        egress: &Arc<Egress>,
        limits: &PluginLimits,
        message: Message,
        timeout: Duration,
        reuse: Option<ReuseScope>,
    ) -> CallOutcome<Result<Receipt, Failure>> {
        let Loaded::Transport(pre) = &**loaded else {
            return outcome_without_call(Err(Failure::invalid_spec(format!(
                "this plugin is a {}, not a transport-plugin",
                loaded.world().as_str()
            ))));
        };
        if message.spec_json.len() > limits.max_io_bytes as usize {
            return outcome_without_call(Err(Failure::invalid_spec(format!(
                "the rendered spec is larger than the plugin's {} byte limit",
                limits.max_io_bytes
            ))));
        }
        let parked = reuse.as_ref().and_then(|scope| self.instances.take_parked(scope));
        let reused = parked.is_some();
        let ((mut store, plugin, slot), calls_before) = match parked {
            Some(parked) => parked,
            None => match self.instances.take_or_instantiate(&self.engine, spare, pre, egress, limits).await {
                Ok(instance) => (instance, 0),
                Err((mut store, failure)) => {
                    return CallOutcome { trapped: true, ..finish_call(&mut store, Err(failure)) }
                }
            },
        };
        if reused {
            store.data_mut().begin_another_call();
        }
        // A scope that finds parked instances needs no spare.
        let refill = if reused { None } else { self.instances.claim_refill(spare, limits.memory_mb) };
        arm_cpu_deadline(&mut store, timeout);
        store.data_mut().outbound.set_deadline(std::time::Instant::now() + timeout);
        // Called inside the attempt's span: the plugin's requests continue its trace.
        store.data_mut().outbound.set_traceparent(crate::trace::TraceParent::current());
        store.data_mut().outbound.set_attempt(&message);
        let call = plugin.taskexec_plugin_transport().call_deliver(&mut store, &message);
        let call = tokio::time::timeout(timeout + Duration::from_secs(1), call);
        let answered = while_waiting(call, self.instances.upkeep(&self.engine, refill, pre, egress, limits)).await;
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
        let outcome = CallOutcome { trapped, reused, ..finish_call(&mut store, result) };
        let calls = calls_before + 1;
        match reuse {
            Some(scope) if !trapped && calls < limits.calls_per_instance && store.data().fit_for_another_call() => {
                self.instances.park(scope, (store, plugin, slot), calls)
            }
            _ => self.instances.retire(store, slot),
        }
        outcome
    }

    /// Run `transport.validate` for an endpoint spec at registration.
    pub async fn validate(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        spec_json: String,
    ) -> Result<Result<(), String>, PluginError> {
        let Loaded::Transport(pre) = loaded else {
            return Err(PluginError::WrongWorld { actual: loaded.world().as_str(), expected: "transport-plugin" });
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin = pre.instantiate_async(&mut *store).await?;
            plugin.taskexec_plugin_transport().call_validate(store, &spec_json).await
        };
        let (_, result) = self.call_once(limits, VALIDATE_TIMEOUT, call).await;
        result.map_err(|why| PluginError::Call(format!("the plugin's validate {why}")))
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
            return Err(RenderError::new(
                format!("this plugin is a {}, not a renderer-plugin", loaded.world().as_str()),
                None,
            ));
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin: RendererPlugin = pre.instantiate_async(&mut *store).await?;
            let renderer = plugin.taskexec_plugin_renderer();
            match &context_json {
                Some(context) => renderer.call_render(store, &template_json, context).await,
                None => renderer.call_check(store, &template_json).await.map(|r| r.map(|()| String::new())),
            }
        };
        let (_, result) = self.call_once(limits, VALIDATE_TIMEOUT, call).await;
        result.map_err(|why| RenderError::new(format!("the renderer plugin {why}"), None))?
    }

    /// One call in a fresh instance whose store can send nothing, with a slot of the pool, `cpu`
    /// of CPU time (instantiation included) and a second more of wall clock. The store, for
    /// what the plugin logged; Err: why the call did not return, in words that follow "the
    /// plugin's …" (a trap, the deadline).
    async fn call_once<T>(
        &self,
        limits: &PluginLimits,
        cpu: Duration,
        call: impl AsyncFnOnce(&mut Store<PluginState>) -> wasmtime::Result<T>,
    ) -> (Store<PluginState>, Result<T, String>) {
        let _slot = self.instances.slot(limits.memory_mb).await;
        let mut store = self.engine.store(self.no_egress.clone(), limits, cpu);
        let result = match tokio::time::timeout(cpu + Duration::from_secs(1), call(&mut store)).await {
            Err(_) => Err(format!("did not return within {} ms", cpu.as_millis())),
            Ok(Err(trap)) => Err(format!("failed: {}", trap_failure(&trap, cpu).message)),
            Ok(Ok(value)) => Ok(value),
        };
        (store, result)
    }

    /// Run `classifier.check` for an endpoint's `classifier.config` at registration.
    pub async fn check_classifier_config(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        config_json: String,
    ) -> Result<Result<(), String>, PluginError> {
        let Loaded::Classifier(pre) = loaded else {
            return Err(PluginError::WrongWorld { actual: loaded.world().as_str(), expected: "classifier-plugin" });
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin: ClassifierPlugin = pre.instantiate_async(&mut *store).await?;
            plugin.taskexec_plugin_classifier().call_check(store, &config_json).await
        };
        let (_, result) = self.call_once(limits, VALIDATE_TIMEOUT, call).await;
        result.map_err(|why| PluginError::Call(format!("the classifier's check {why}")))
    }

    /// Run `classifier.classify` on one attempt's answer, in a fresh instance that can send
    /// nothing, with `cpu` of CPU time. Err: why the classifier gave no verdict (a trap, its
    /// deadline), for the attempt's logs.
    pub async fn classify(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        answer: Answer,
        cpu: Duration,
    ) -> CallOutcome<Result<Verdict, String>> {
        let Loaded::Classifier(pre) = loaded else {
            return outcome_without_call(Err(format!(
                "this plugin is a {}, not a classifier-plugin",
                loaded.world().as_str()
            )));
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin: ClassifierPlugin = pre.instantiate_async(&mut *store).await?;
            plugin.taskexec_plugin_classifier().call_classify(store, &answer).await
        };
        let (mut store, result) = self.call_once(limits, cpu, call).await;
        finish_call(&mut store, result)
    }

    /// Run `schedule.check` for a job's schedule spec, at its creation or update.
    pub async fn check_schedule(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        spec_json: String,
    ) -> Result<Result<(), String>, PluginError> {
        let Loaded::Schedule(pre) = loaded else {
            return Err(PluginError::WrongWorld { actual: loaded.world().as_str(), expected: "schedule-plugin" });
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin: SchedulePlugin = pre.instantiate_async(&mut *store).await?;
            plugin.taskexec_plugin_schedule().call_check(store, &spec_json).await
        };
        let (_, result) = self.call_once(limits, VALIDATE_TIMEOUT, call).await;
        result.map_err(|why| PluginError::Call(format!("the schedule's check {why}")))
    }

    /// Run `schedule.next`: the first local time after `after`, with `cpu` of CPU time. Err:
    /// the plugin's own refusal, a trap or its deadline, in words.
    pub async fn schedule_next(
        &self,
        loaded: &Loaded,
        limits: &PluginLimits,
        spec_json: &str,
        after: LocalTime,
        cpu: Duration,
    ) -> Result<Option<LocalTime>, String> {
        let Loaded::Schedule(pre) = loaded else {
            return Err(format!("this plugin is a {}, not a schedule-plugin", loaded.world().as_str()));
        };
        let call = async |store: &mut Store<PluginState>| {
            let plugin: SchedulePlugin = pre.instantiate_async(&mut *store).await?;
            plugin.taskexec_plugin_schedule().call_next(store, spec_json, after).await
        };
        self.call_once(limits, cpu, call).await.1?
    }
}

fn outcome_without_call<T>(result: T) -> CallOutcome<T> {
    CallOutcome {
        result,
        logs: CallLogs::default(),
        denials: Vec::new(),
        ungranted: Vec::new(),
        trapped: false,
        reused: false,
    }
}

fn finish_call<T>(store: &mut Store<PluginState>, result: T) -> CallOutcome<T> {
    let state = store.data_mut();
    state.collect_output();
    let denials = state.outbound.denials();
    let ungranted = state.outbound.ungranted();
    let logs = state.take_logs();
    CallOutcome { result, logs, denials, ungranted, trapped: false, reused: false }
}
