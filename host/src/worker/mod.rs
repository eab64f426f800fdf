//! The worker role: claims due executions and runs each through the [`pipeline`].
//!
//! The poller never claims more than it has free slots (`TE_WORKER_MAX_CONCURRENT`): it takes
//! one permit (waiting if all are busy), grabs whatever other permits are free, and claims that
//! many executions in one statement. When the queue is empty it sleeps until woken — in
//! process when the API or scheduler makes work, by PostgreSQL NOTIFY across processes — or
//! until the poll interval passes, the fallback when a wake-up is missed or unavailable.

pub mod cache;
pub mod completer;
pub mod pipeline;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::scheduler::Wakeups;
use crate::store::{now, Signal, Store};

pub use pipeline::{CacheTtls, Pipeline};

/// The most executions one claim statement takes.
const CLAIM_BATCH: usize = 100;

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub worker_id: String,
    pub max_concurrent: usize,
    pub poll_interval: Duration,
    pub shutdown_timeout: Duration,
}

pub async fn run(
    store: Arc<dyn Store>,
    pipeline: Arc<Pipeline>,
    config: WorkerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
) {
    match store.listen(Signal::WorkReady, wakeups.work_ready.clone()).await {
        Ok(true) => tracing::info!("Worker listens for new work (LISTEN/NOTIFY)."),
        Ok(false) => tracing::info!(
            poll_ms = config.poll_interval.as_millis() as u64,
            "Worker polls for work from other processes."
        ),
        Err(error) => tracing::warn!(%error, "Could not LISTEN for new work; polling instead."),
    }
    let slots = Arc::new(Semaphore::new(config.max_concurrent));
    let mut in_flight = JoinSet::new();
    loop {
        let first = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let mut permits = vec![first];
        while permits.len() < CLAIM_BATCH {
            match slots.clone().try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        let wanted = permits.len();
        let claimed = match store.execution_claim(&config.worker_id, now(), wanted as i64).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "Claiming executions failed; retrying after the poll interval.");
                Vec::new()
            }
        };
        let got = claimed.len();
        for (execution, permit) in claimed.into_iter().zip(permits.drain(..got)) {
            let pipeline = pipeline.clone();
            in_flight.spawn(async move {
                pipeline.process(execution).await;
                drop(permit);
            });
        }
        drop(permits);
        while in_flight.try_join_next().is_some() {}
        if got < wanted {
            // The queue is drained: wait for a wake-up, the poll interval, or shutdown.
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
    }
}
