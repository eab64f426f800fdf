//! The worker role: claims due executions and runs each through the [`pipeline`].
//!
//! The poller never claims more than it has free slots (`TE_WORKER_MAX_CONCURRENT`): it takes
//! one permit (waiting if all are busy), grabs whatever other permits are free, and claims that
//! many executions in one statement, shared fairly between endpoints ([`fairness`]). When the
//! queue is empty it sleeps until woken — in process when the API or scheduler makes work or
//! a saturated endpoint frees slots, by PostgreSQL NOTIFY across processes — or until the poll
//! interval passes, the fallback when a wake-up is missed or unavailable.

pub mod abort;
pub mod cache;
pub mod classify;
pub mod completer;
pub mod fairness;
pub mod lease;
pub mod on_time;
mod outcome;
pub mod pipeline;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::health::Liveness;
use crate::scheduler::Wakeups;
use crate::store::{now, ClaimParams, Signal, Store, READY_AHEAD};

pub use lease::Leases;

pub use pipeline::{CacheTtls, Pipeline};

/// One of the worker's delivery slots (`TE_WORKER_MAX_CONCURRENT`), taken by an attempt at its
/// claim and given back when its delivery is over and its outcome is queued for writing
/// ([`Slot::free`]), not when that outcome is written: a slot waiting on a commit sends
/// nothing, and with 50 slots the worker delivered only as many per commit. What waits for
/// writing is bounded by the completer's queue, which holds back slots when full.
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    fairness: Arc<fairness::Fairness>,
    endpoint: String,
    wake: Arc<Notify>,
}

impl Slot {
    fn take(
        permit: OwnedSemaphorePermit,
        fairness: Arc<fairness::Fairness>,
        endpoint: &str,
        wake: Arc<Notify>,
    ) -> Self {
        fairness.took(endpoint);
        crate::metrics::worker_slot_taken();
        Self { permit: Some(permit), fairness, endpoint: endpoint.to_owned(), wake }
    }

    /// The delivery is over: the slot goes to the next claim.
    pub fn free(&mut self) {
        if let Some(permit) = self.permit.take() {
            drop(permit);
            crate::metrics::worker_slot_freed();
            if self.fairness.released(&self.endpoint) {
                self.wake.notify_one();
            }
        }
    }
}

impl Drop for Slot {
    /// Dropped once the outcome is written. An endpoint with `max_concurrency` counts its
    /// RUNNING executions in the claim, and this one stopped being RUNNING only now: the
    /// worker claims again rather than wait out its poll interval for that endpoint's work.
    fn drop(&mut self) {
        self.free();
        if self.fairness.limited(&self.endpoint) {
            self.wake.notify_one();
        }
    }
}

/// The most executions one claim statement takes.
const CLAIM_BATCH: usize = 100;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub worker_id: String,
    pub max_concurrent: usize,
    pub poll_interval: Duration,
    pub shutdown_timeout: Duration,
    /// How long a claim holds an execution without renewal (`TE_WORKER_LEASE_SEC`).
    pub lease: Duration,
}

pub async fn run(
    store: Arc<dyn Store>,
    pipeline: Arc<Pipeline>,
    config: WorkerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    liveness: Arc<Liveness>,
) {
    // One connection for both: new work, and aborts of what this worker holds (`abort`).
    let abort_told = Arc::new(tokio::sync::Notify::new());
    let signals = [(Signal::WorkReady, wakeups.work_ready.clone()), (Signal::AbortRequested, abort_told.clone())];
    match store.listen(&signals).await {
        Ok(true) => tracing::info!("Worker listens for new work (LISTEN/NOTIFY)."),
        Ok(false) => tracing::info!(
            poll_ms = config.poll_interval.as_millis() as u64,
            "Worker polls for work from other processes."
        ),
        Err(error) => tracing::warn!(%error, "Could not LISTEN for new work; polling instead."),
    }
    let slots = Arc::new(Semaphore::new(config.max_concurrent));
    crate::metrics::worker_slots_capacity(config.max_concurrent);
    let mut in_flight = JoinSet::new();
    let leases = Leases::new(store.clone(), config.lease);
    // Renewals go on through a graceful shutdown, while attempts in flight finish.
    let keeper_stop = CancellationToken::new();
    let keeper_beat = liveness.register("worker.lease_keeper", config.lease / 3);
    let keeper = tokio::spawn(leases.clone().keep(keeper_stop.clone(), keeper_beat));
    let watcher_beat = liveness.register("worker.abort_watcher", abort::EVERY);
    let watcher = tokio::spawn(abort::watch(
        store.clone(),
        leases.clone(),
        config.worker_id.clone(),
        abort_told,
        keeper_stop.clone(),
        watcher_beat,
    ));
    let fairness = Arc::new(fairness::Fairness::new(config.max_concurrent));
    let beat = liveness.register("worker.claimer", config.poll_interval);
    loop {
        beat.beat();
        let first = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            // Every slot busy: still alive, waiting.
            () = tokio::time::sleep(config.poll_interval) => continue,
        };
        let mut permits = vec![first];
        while permits.len() < CLAIM_BATCH {
            match slots.clone().try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        let wanted = permits.len();
        if fairness.limits_stale() {
            match store.endpoint_concurrency_limits().await {
                Ok(limits) => fairness.set_limits(limits),
                Err(error) => tracing::warn!(%error, "Could not read endpoints' max_concurrency; using the last read."),
            }
        }
        let at = now();
        let claim = ClaimParams {
            worker_id: config.worker_id.clone(),
            now: at,
            // What the promoter made ready ahead of its time is claimed now and started at
            // its time by the pipeline: a claim's round trip is off that path.
            due_by: at + READY_AHEAD,
            limit: wanted as i64,
            lease: config.lease,
            shares: fairness.shares(),
        };
        let claimed = match store.execution_claim(&claim).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "Claiming executions failed; retrying after the poll interval.");
                Vec::new()
            }
        };
        let got = claimed.len();
        for (execution, permit) in claimed.into_iter().zip(permits.drain(..got)) {
            let held = leases.hold(&execution.execution_id, execution.attempt_count);
            let slot = Slot::take(permit, fairness.clone(), &execution.endpoint, wakeups.work_ready.clone());
            // Claimed ahead of its time: it waits for its start on the runtime kept for that.
            let ahead = execution.run_at > at;
            let attempt = pipeline.clone().process(execution, leases.clone(), held, slot);
            if ahead {
                in_flight.spawn_on(attempt, on_time::handle());
            } else {
                in_flight.spawn(attempt);
            }
        }
        drop(permits);
        while in_flight.try_join_next().is_some() {}
        // A part-filled claim goes round again at once (an endpoint with less due work than
        // its part of the claim leaves room another endpoint's work may fill) unless an
        // endpoint is at its cap: then its next slot, or new work, wakes the loop.
        if got == 0 || (got < wanted && fairness.any_saturated()) {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = wakeups.work_ready.notified() => {}
                () = tokio::time::sleep(config.poll_interval) => {}
            }
        }
    }

    // Graceful shutdown: no new claims; wait a while for the attempts in flight. Those still
    // running at the deadline stay RUNNING in the database for the reclaimer.
    let pending = in_flight.len();
    if pending > 0 {
        tracing::info!(pending, timeout_s = config.shutdown_timeout.as_secs(), "Waiting for in-flight deliveries.");
    }
    let drained =
        tokio::time::timeout(config.shutdown_timeout, async { while in_flight.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            abandoned = in_flight.len(),
            "Shutdown timeout: leaving unfinished executions to the reclaimer."
        );
        in_flight.abort_all();
        while in_flight.join_next().await.is_some() {}
    }
    // Every pipeline task has ended: write what the completer still holds, for as long as
    // shutdown allows (the database may be down; then leases expire and the reclaimer retries).
    if let Ok(pipeline) = Arc::try_unwrap(pipeline) {
        pipeline.close(config.shutdown_timeout).await;
    }
    keeper_stop.cancel();
    let _ = keeper.await;
    let _ = watcher.await;
    beat.stopped();
}
