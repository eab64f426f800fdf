//! The instance pool: the slots of the pooling allocator as permits, spare instances made
//! before a call needs them, and finished calls' stores returned to the pool off the hot path.
//!
//! Every call still runs in a store and instance of its own: a spare is never called before it
//! is handed out, and a finished store is never run again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;

use super::engine::{trap_failure, PluginEngine};
use super::limits::PluginLimits;
use super::outbound::Egress;
use super::sandbox::PluginState;
use crate::contract::{Failure, TransportPlugin, TransportPluginPre};

/// Plugin calls that may run at once in one process (the pooling allocator's slots).
pub(super) const MAX_CONCURRENT_INSTANCES: u32 = 128;
/// Finished calls' stores kept for later calls to return to the pool.
const MAX_RETIRED: usize = 8;
/// Time a call may take to validate a spec at registration, and an instance to start.
pub const VALIDATE_TIMEOUT: Duration = Duration::from_secs(5);

/// A store and instance of a transport plugin, and the slot it holds until dropped.
pub(super) type Instance = (Store<PluginState>, TransportPlugin, OwnedSemaphorePermit);
/// A finished call's store and the slot it holds until dropped.
type RetiredStore = (Store<PluginState>, OwnedSemaphorePermit);

pub(super) struct InstancePool {
    /// One permit per instance slot of the pooling allocator, held for as long as a store
    /// lives: calls beyond the pool wait for a slot instead of failing, and spares are made
    /// only from slots nobody waits for.
    slots: Arc<Semaphore>,
    /// Finished calls' stores, for the next call's upkeep to return to the pool.
    retired: Mutex<Vec<RetiredStore>>,
}

impl InstancePool {
    pub(super) fn new() -> Self {
        Self { slots: Arc::new(Semaphore::new(MAX_CONCURRENT_INSTANCES as usize)), retired: Mutex::default() }
    }

    /// A permit for one instance slot, waiting for one to be free.
    pub(super) async fn slot(&self) -> OwnedSemaphorePermit {
        self.slots.clone().acquire_owned().await.expect("the instance semaphore is never closed")
    }

    /// Slots neither a call, a spare nor a retired store holds.
    pub(super) fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    fn plenty(&self) -> bool {
        self.free_slots() > MAX_CONCURRENT_INSTANCES as usize / 2
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
        let slot = self.slot().await;
        match instantiate_transport(engine, pre, egress.clone(), limits).await {
            (store, Ok(plugin)) => Ok((store, plugin, slot)),
            (store, Err(failure)) => Err((store, failure)),
        }
    }

    /// A finished call's store: kept for the next call's upkeep to drop, or dropped in the
    /// background when slots are short (a retired store holds its slot until then). It is never
    /// run again; an idle runtime keeps the last one until its next call.
    pub(super) fn retire(&self, store: Store<PluginState>, slot: OwnedSemaphorePermit) {
        let plenty = self.plenty();
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
    pub(super) fn claim_refill(&self, spare: &Arc<SpareInstance>) -> Option<RefillClaim> {
        if spare.refilling.swap(true, Ordering::AcqRel) {
            return None;
        }
        let mut claim = RefillClaim { spare: spare.clone(), slot: None };
        // Only a slot free right now, and only while half the pool is free: an idle spare keeps
        // its slot, so spares of many plugins must never crowd out the calls themselves.
        claim.slot = Some(self.plenty().then(|| self.slots.clone().try_acquire_owned().ok()).flatten()?);
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
    slot: Option<OwnedSemaphorePermit>,
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
