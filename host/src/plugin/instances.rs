//! The instance pool: the slots of the pooling allocator as permits, spare instances made
//! before a call needs them, finished calls' stores returned to the pool off the hot path, and
//! the parked instances of plugins installed with `calls_per_instance` above 1.
//!
//! By default every call runs in a store and instance of its own: a spare is never called
//! before it is handed out, and a finished store is never run again. A plugin installed to
//! reuse instances has its instance parked after a call that returned, under its
//! [`ReuseScope`] (that plugin version, one endpoint version), for the next delivery of that
//! scope only; an instance that trapped, ran out of time, made its last allowed call or grew
//! past half its memory limit is never parked. Parked instances give their slots up to any
//! call that finds none free; a call that finishes while another waits for a slot frees its
//! own instead of parking; and a parked instance is dropped after [`PARKED_IDLE`] unused.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;

use super::engine::{trap_failure, PluginEngine};
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::sandbox::PluginState;
use crate::contract::{Failure, TransportPlugin, TransportPluginPre};
use crate::transport::EndpointVersion;

/// Plugin calls that may run at once in one process (the pooling allocator's slots).
pub(super) const MAX_CONCURRENT_INSTANCES: u32 = 128;
/// Finished calls' stores kept for later calls to return to the pool.
const MAX_RETIRED: usize = 8;
/// Time a call may take to validate a spec at registration, and an instance to start.
pub const VALIDATE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a parked instance waits for its scope's next delivery before it is dropped.
pub const PARKED_IDLE: Duration = Duration::from_secs(10);
/// How often parked instances are looked over for ones idle past [`PARKED_IDLE`].
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// A store and instance of a transport plugin, and the slot it holds until dropped.
pub(super) type Instance = (Store<PluginState>, TransportPlugin, Slot);
/// A finished call's store and the slot it holds until dropped.
type RetiredStore = (Store<PluginState>, Slot);

/// What a store holds for as long as it lives: one of the pool's instance slots, and its
/// memory limit's share of the process-wide plugin memory budget (`TE_PLUGIN_MEMORY_TOTAL_MB`).
pub(super) struct Slot {
    _instance: OwnedSemaphorePermit,
    _memory: OwnedSemaphorePermit,
}

pub(super) struct InstancePool {
    /// One permit per instance slot of the pooling allocator, held for as long as a store
    /// lives: calls beyond the pool wait for a slot instead of failing, and spares are made
    /// only from slots nobody waits for.
    slots: Arc<Semaphore>,
    /// One permit per MiB of the plugin memory budget: a store holds its memory limit's worth
    /// for as long as it lives, so instances at their limits together stay within the budget;
    /// calls beyond it wait (`taskexec_plugin_memory_wait_seconds`).
    memory: Arc<Semaphore>,
    memory_total_mb: usize,
    /// Finished calls' stores, for the next call's upkeep to return to the pool.
    retired: Mutex<Vec<RetiredStore>>,
    /// Instances waiting for their scope's next delivery; swept by a task of their own,
    /// started by the first instance parked.
    parked: Arc<Mutex<Parked>>,
    sweeping: AtomicBool,
    /// Calls waiting for a slot: while there are any, a finished call frees its slot instead
    /// of parking its instance on it.
    waiting: AtomicUsize,
}

/// The deliveries that may share an instance: one loaded version of one plugin (with its
/// grants and limits; [`ReadyPlugin::id`](super::host::ReadyPlugin)) and one endpoint version.
/// Nothing a plugin keeps in memory ever reaches another endpoint's delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReuseScope {
    pub plugin: u64,
    pub endpoint: EndpointVersion,
}

/// A parked instance, the calls it has made, and since when it waits.
struct ParkedInstance {
    instance: Instance,
    calls: u32,
    since: Instant,
}

#[derive(Default)]
struct Parked {
    /// By scope, the most recently parked last.
    by_scope: HashMap<ReuseScope, Vec<ParkedInstance>>,
}

impl Parked {
    /// Instances parked now, in all scopes.
    fn len(&self) -> usize {
        self.by_scope.values().map(Vec::len).sum()
    }

    /// Take out the instances idle past [`PARKED_IDLE`], for the caller to drop.
    fn sweep(&mut self) -> Vec<ParkedInstance> {
        let mut idle = Vec::new();
        self.by_scope.retain(|_, parked| {
            // Oldest first: the idle ones are a prefix.
            let keep_from = parked.iter().position(|p| p.since.elapsed() < PARKED_IDLE).unwrap_or(parked.len());
            idle.extend(parked.drain(..keep_from));
            !parked.is_empty()
        });
        idle
    }

    /// Take out the instance parked longest, in any scope.
    fn oldest(&mut self) -> Option<ParkedInstance> {
        let scope = self.by_scope.iter().min_by_key(|(_, parked)| parked[0].since).map(|(scope, _)| scope.clone())?;
        let parked = self.by_scope.get_mut(&scope)?;
        let oldest = parked.remove(0);
        if parked.is_empty() {
            self.by_scope.remove(&scope);
        }
        Some(oldest)
    }
}

impl InstancePool {
    /// A pool whose instances may use `memory_total_mb` MiB of linear memory together.
    pub(super) fn new(memory_total_mb: u32) -> Self {
        let memory_total_mb = (memory_total_mb as usize).min(Semaphore::MAX_PERMITS);
        Self {
            slots: Arc::new(Semaphore::new(MAX_CONCURRENT_INSTANCES as usize)),
            memory: Arc::new(Semaphore::new(memory_total_mb)),
            memory_total_mb,
            retired: Mutex::default(),
            parked: Arc::default(),
            sweeping: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
        }
    }

    /// An instance slot and `memory_mb` of the memory budget: free ones, else ones parked
    /// instances give up, else waiting for calls to free them (calls that finish meanwhile
    /// free theirs, see `park`).
    pub(super) async fn slot(&self, memory_mb: u32) -> Slot {
        let memory_mb = memory_mb.min(self.memory_total_mb as u32);
        let instance = loop {
            if let Ok(permit) = self.slots.clone().try_acquire_owned() {
                break Some(permit);
            }
            if !self.evict_oldest() {
                break None;
            }
        };
        let memory = loop {
            if let Ok(permit) = self.memory.clone().try_acquire_many_owned(memory_mb) {
                break Some(permit);
            }
            if !self.evict_oldest() {
                break None;
            }
        };
        match (instance, memory) {
            (Some(instance), Some(memory)) => Slot { _instance: instance, _memory: memory },
            (instance, memory) => {
                self.waiting.fetch_add(1, Ordering::AcqRel);
                let _counted = Waiting(&self.waiting);
                let instance = match instance {
                    Some(permit) => permit,
                    None => self.slots.clone().acquire_owned().await.expect("the instance semaphore is never closed"),
                };
                let memory = match memory {
                    Some(permit) => permit,
                    None => {
                        let started = Instant::now();
                        let permit = self
                            .memory
                            .clone()
                            .acquire_many_owned(memory_mb)
                            .await
                            .expect("the memory semaphore is never closed");
                        crate::metrics::plugin_memory_waited(started.elapsed());
                        permit
                    }
                };
                Slot { _instance: instance, _memory: memory }
            }
        }
    }

    /// Drop the instance parked longest, to free its slot and memory; false if none is parked.
    fn evict_oldest(&self) -> bool {
        let evicted = self.parked.lock().expect("parked instances lock").oldest();
        // Dropped here, outside the lock.
        evicted.is_some()
    }

    /// The instance parked last for `scope`, and the calls it has made.
    pub(super) fn take_parked(&self, scope: &ReuseScope) -> Option<(Instance, u32)> {
        let mut parked = self.parked.lock().expect("parked instances lock");
        let instances = parked.by_scope.get_mut(scope)?;
        let taken = instances.pop()?;
        if instances.is_empty() {
            parked.by_scope.remove(scope);
        }
        Some((taken.instance, taken.calls))
    }

    /// Keep `instance`, which has made `calls` calls, for the next delivery of `scope` — unless
    /// a call is waiting for a slot: then it is retired, and its slot goes to that call.
    pub(super) fn park(&self, scope: ReuseScope, instance: Instance, calls: u32) {
        if self.waiting.load(Ordering::Acquire) > 0 {
            let (store, _, slot) = instance;
            return self.retire(store, slot);
        }
        let parked = ParkedInstance { instance, calls, since: Instant::now() };
        self.parked.lock().expect("parked instances lock").by_scope.entry(scope).or_default().push(parked);
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep_parked(Arc::downgrade(&self.parked)));
        }
    }

    /// Instances parked now, in all scopes.
    pub(super) fn parked(&self) -> usize {
        self.parked.lock().expect("parked instances lock").len()
    }

    /// Slots neither a call, a spare nor a retired store holds.
    pub(super) fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// Whether more than half the slots are free, and more than half the memory budget would
    /// be after `memory_mb` more: spares, idle until their plugin's next call, never take what
    /// calls themselves need.
    fn plenty(&self, memory_mb: u32) -> bool {
        self.free_slots() > MAX_CONCURRENT_INSTANCES as usize / 2
            && self.memory.available_permits().saturating_sub(memory_mb as usize) > self.memory_total_mb / 2
    }

    /// `spare`'s instance when one is ready, or a fresh one in a slot waited for.
    pub(super) async fn take_or_instantiate(
        &self,
        engine: &PluginEngine,
        spare: &SpareInstance,
        pre: &TransportPluginPre<PluginState>,
        egress: &Arc<Egress>,
        limits: &PluginLimits,
    ) -> Result<Instance, (Store<PluginState>, Failure)> {
        if let Some(instance) = spare.ready.lock().expect("spare instance lock").take() {
            return Ok(instance);
        }
        let slot = self.slot(limits.memory_mb).await;
        match instantiate_transport(engine, pre, egress.clone(), limits).await {
            (store, Ok(plugin)) => Ok((store, plugin, slot)),
            (store, Err(failure)) => Err((store, failure)),
        }
    }

    /// A finished call's store: kept for the next call's upkeep to drop, or dropped in the
    /// background when slots are short (a retired store holds its slot until then). It is never
    /// run again; an idle runtime keeps the last one until its next call.
    pub(super) fn retire(&self, store: Store<PluginState>, slot: Slot) {
        let plenty = self.plenty(0);
        let mut retired = self.retired.lock().expect("retired stores lock");
        if plenty && retired.len() < MAX_RETIRED {
            retired.push((store, slot));
        } else {
            drop(retired);
            drop_in_background((store, slot));
        }
    }

    /// Claim the making of `spare`'s next instance and a slot for it, unless a refill is under
    /// way or slots are short. Claimed as the call starts, made by its `upkeep`.
    pub(super) fn claim_refill(&self, spare: &Arc<SpareInstance>, memory_mb: u32) -> Option<RefillClaim> {
        if spare.refilling.swap(true, Ordering::AcqRel) {
            return None;
        }
        let mut claim = RefillClaim { spare: spare.clone(), slot: None };
        // Only a slot and memory free right now, and only while half of each is free: an idle
        // spare keeps them, so spares of many plugins must never crowd out the calls themselves.
        if !self.plenty(memory_mb) {
            return None;
        }
        let instance = self.slots.clone().try_acquire_owned().ok()?;
        let memory = self.memory.clone().try_acquire_many_owned(memory_mb).ok()?;
        claim.slot = Some(Slot { _instance: instance, _memory: memory });
        Some(claim)
    }

    /// The upkeep a call does while it waits on the network: return the slots of finished
    /// calls to the pool (which resets their memory) and make the next spare instance.
    ///
    /// Done on the call's own task rather than a spawned one: on an idle runtime a spawned
    /// task wakes another worker thread, and with it another core, for every delivery.
    pub(super) async fn upkeep(
        &self,
        engine: &PluginEngine,
        refill: Option<RefillClaim>,
        pre: &TransportPluginPre<PluginState>,
        egress: &Arc<Egress>,
        limits: &PluginLimits,
    ) {
        // First let the request the call has just handed to its connection go out.
        tokio::task::yield_now().await;
        let finished = std::mem::take(&mut *self.retired.lock().expect("retired stores lock"));
        drop(finished);
        if let Some(mut claim) = refill {
            if let (store, Ok(plugin)) = instantiate_transport(engine, pre, egress.clone(), limits).await {
                let slot = claim.slot.take().expect("a claim has its slot until used");
                *claim.spare.ready.lock().expect("spare instance lock") = Some((store, plugin, slot));
            }
        }
    }
}

/// Counts a call among those waiting for a slot for as long as it lives (the wait may be
/// cancelled with its call).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Every [`SWEEP_EVERY`], drop the parked instances idle past [`PARKED_IDLE`] and report how
/// many are parked; ends with the pool.
async fn sweep_parked(parked: std::sync::Weak<Mutex<Parked>>) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(parked) = parked.upgrade() else { return };
        let (idle, left) = {
            let mut parked = parked.lock().expect("parked instances lock");
            let idle = parked.sweep();
            (idle, parked.len())
        };
        drop(idle);
        crate::metrics::plugin_instances_parked(left);
    }
}

/// Drop stores (and free their slots) on another task: dropping one resets its memory, which
/// the call that let it go should not wait for.
fn drop_in_background<T: Send + 'static>(stores: T) {
    tokio::spawn(async move { drop(stores) });
}

/// A fresh instance of one transport plugin version, made before a call needs it.
#[derive(Default)]
pub struct SpareInstance {
    ready: Mutex<Option<Instance>>,
    refilling: AtomicBool,
}

/// The sole right to make a spare's next instance, and the slot it goes in. Dropped — the
/// instance made or not, even when the call making it is cancelled — it lets the next call try.
pub(super) struct RefillClaim {
    spare: Arc<SpareInstance>,
    slot: Option<Slot>,
}

impl Drop for RefillClaim {
    fn drop(&mut self) {
        self.spare.refilling.store(false, Ordering::Release);
    }
}

/// A fresh store and instance of a transport plugin. Instantiation runs no guest code but a
/// start function, which gets the validation budget of CPU and wall-clock time.
async fn instantiate_transport(
    engine: &PluginEngine,
    pre: &TransportPluginPre<PluginState>,
    egress: Arc<Egress>,
    limits: &PluginLimits,
) -> (Store<PluginState>, Result<TransportPlugin, Failure>) {
    let mut store = engine.store(egress, limits, VALIDATE_TIMEOUT);
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

/// Poll `call`, and while it waits, `upkeep`; a call that finishes first (one that never waited
/// long) then finishes the upkeep, so the next call still finds a spare.
pub(super) async fn while_waiting<T>(call: impl Future<Output = T>, upkeep: impl Future<Output = ()>) -> T {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_beyond_the_memory_budget_wait_for_room() {
        let pool = InstancePool::new(128);
        let first = pool.slot(64).await;
        let _second = pool.slot(64).await;
        assert_eq!(pool.memory.available_permits(), 0);
        // A third call at its limit would pass the budget: it waits until one is dropped.
        let third = pool.slot(64);
        let mut third = std::pin::pin!(third);
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut third).await.is_err(), "no room yet");
        assert_eq!(pool.waiting.load(Ordering::Acquire), 1, "counted as waiting, so finished calls do not park");
        drop(first);
        let _third = tokio::time::timeout(Duration::from_secs(5), third).await.expect("room once a call ends");
        // A limit larger than the whole budget is held to the budget, not refused forever.
        drop(_second);
        drop(_third);
        let _all = tokio::time::timeout(Duration::from_secs(5), pool.slot(4096)).await.expect("the whole budget");
    }

    #[test]
    fn spares_are_made_only_while_half_the_memory_budget_stays_free() {
        let pool = InstancePool::new(256);
        assert!(pool.plenty(64));
        assert!(!pool.plenty(129), "a spare may not take the budget past half");
    }
}
