//! The scheduler role: three loops, each idempotent, so any number of scheduler processes can
//! run against one database without leader election.
//!
//! - [`cron_materializer`]: turns cron ticks into executions shortly before they are due
//!   (unique keys + compare-and-set).
//! - [`promoter`]: PENDING executions whose `run_at` has come become QUEUED.
//! - [`reclaimer`]: RUNNING executions whose worker's lease expired become RETRYING or FAILED.
//! - [`purger`]: finished executions and jobs older than `TE_RETENTION` are deleted.
//! - [`failure_notifier`]: a failed execution's `on_failure` endpoint gets a job about it, a
//!   successful one's `on_success` endpoint likewise.
//! - [`vacuumer`]: the queue's tables are vacuumed when the database's autovacuum does not.
//! - [`partitioner`]: history partitions made ahead, and dropped whole once older than
//!   `TE_RETENTION` (where the store keeps history in time partitions).

pub mod cron_materializer;
pub mod failure_notifier;
pub mod jitter;
pub mod partitioner;
pub mod promoter;
pub mod purger;
pub mod reclaimer;
pub mod schedule;
pub mod ticks;
pub mod vacuumer;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::domain::ExecutionStatus;
use crate::health::Liveness;
use crate::store::{Signal, Store};

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub cron_tick_interval: Duration,
    pub cron_batch_size: i64,
    /// How far ahead of its time a cron tick is materialized (as a PENDING execution).
    pub cron_lookahead: Duration,
    pub promote_interval: Duration,
    pub reclaim_interval: Duration,
    /// How long finished executions and jobs are kept (zero: forever).
    pub retention: Duration,
    pub purge_interval: Duration,
    /// When the scheduler vacuums the queue's tables itself.
    pub vacuum: vacuumer::VacuumMode,
}

/// Signals between the roles of one process.
#[derive(Debug, Clone, Default)]
pub struct Wakeups {
    /// Work became claimable: wakes this process's worker.
    pub work_ready: Arc<Notify>,
    /// A cron job was created or updated, or a tick waiting ahead was released: wakes the
    /// cron materializer.
    pub cron_changed: Arc<Notify>,
    /// A PENDING execution may be due sooner than the promoter planned: wakes the promoter.
    /// (One `Notify` per loop: `notify_one` wakes a single waiter.)
    pub pending_changed: Arc<Notify>,
    /// When this process last told other processes (ms since the Unix epoch).
    last_broadcast_ms: Arc<AtomicU64>,
    /// A coalesced notification is waiting to be sent.
    trailing: Arc<AtomicBool>,
}

/// Cross-process notifications closer together than this are coalesced: a burst of creates
/// wakes other workers once, and each claim takes a batch.
const BROADCAST_EVERY_MS: u64 = 5;

impl Wakeups {
    /// Tell this process's worker, and (through the store) other processes', that work is ready.
    ///
    /// PostgreSQL serializes NOTIFYs at commit, so a burst of new work sends at most one per
    /// `BROADCAST_EVERY_MS`: the first at once, and one trailing notification after the burst so
    /// the last work of it is not left waiting for another process's poll.
    pub async fn work_ready(&self, store: &Arc<dyn Store>) {
        self.work_ready.notify_one();
        let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
        let last = self.last_broadcast_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(last) >= BROADCAST_EVERY_MS
            && self.last_broadcast_ms.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            broadcast(store.as_ref()).await;
        } else if !self.trailing.swap(true, Ordering::Relaxed) {
            let (store, trailing, last) = (store.clone(), self.trailing.clone(), self.last_broadcast_ms.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(BROADCAST_EVERY_MS)).await;
                trailing.store(false, Ordering::Relaxed);
                last.store(u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0), Ordering::Relaxed);
                broadcast(store.as_ref()).await;
            });
        }
    }

    /// Tell this process's cron materializer, and (through the store) other processes', that a
    /// cron job was created, rescheduled or resumed. Without the cross-process signal, a
    /// per-second job created through an `api` process had its first tick made up to
    /// `TE_CRON_TICK_INTERVAL_SEC` late (the soak's first window: 511 ms at p99). One signal
    /// per request, however many jobs it made.
    pub async fn cron_job_changed(&self, store: &Arc<dyn Store>) {
        self.cron_changed.notify_one();
        if let Err(error) = store.signal(Signal::CronChanged).await {
            tracing::warn!(%error, "Could not notify other processes of a cron job change; their schedulers see it at their next pass.");
        }
    }

    /// Executions with these statuses were just written: the workers are woken for QUEUED
    /// ones (claimable now), the promoter for PENDING ones (waiting for their time or an
    /// overlap policy).
    pub async fn executions_written(
        &self,
        store: &Arc<dyn Store>,
        statuses: impl IntoIterator<Item = ExecutionStatus>,
    ) {
        let (mut queued, mut pending) = (false, false);
        for status in statuses {
            queued |= status == ExecutionStatus::Queued;
            pending |= status == ExecutionStatus::Pending;
        }
        if queued {
            self.work_ready(store).await;
        }
        if pending {
            self.pending_changed.notify_one();
        }
    }
}

async fn broadcast(store: &dyn Store) {
    if let Err(error) = store.signal(Signal::WorkReady).await {
        tracing::warn!(%error, "Could not notify other processes of new work; their workers will poll.");
    }
}

/// Start the loops (the purger only with a retention), each reporting to `liveness`.
pub fn spawn(
    store: Arc<dyn Store>,
    plugins: crate::plugin::PluginHost,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    liveness: &Arc<Liveness>,
) -> Vec<JoinHandle<()>> {
    let materializer = liveness.register("scheduler.cron_materializer", config.cron_tick_interval);
    let promoter = liveness.register("scheduler.promoter", config.promote_interval);
    let reclaimer = liveness.register("scheduler.reclaimer", config.reclaim_interval);
    let mut loops = Vec::new();
    // Failures are announced within about a second; the loop is idle (one indexed probe) when
    // nothing failed.
    let every = Duration::from_secs(1);
    let beat = liveness.register("scheduler.failure_notifier", every);
    loops.push(tokio::spawn(failure_notifier::run(store.clone(), every, wakeups.clone(), shutdown.clone(), beat)));
    if !config.retention.is_zero() {
        // A round may take a while on a large backlog; it beats between batches.
        let beat = liveness.register("scheduler.purger", config.purge_interval);
        let purger = purger::run(store.clone(), config.retention, config.purge_interval, shutdown.clone(), beat);
        loops.push(tokio::spawn(purger));
    }
    let every = partitioner::every(config.retention);
    let beat = liveness.register("scheduler.partitioner", every);
    loops.push(tokio::spawn(partitioner::run(store.clone(), config.retention, shutdown.clone(), beat)));
    if config.vacuum != vacuumer::VacuumMode::Off {
        for tables in [vacuumer::Tables::Queue, vacuumer::Tables::History] {
            let beat = liveness.register(tables.loop_name(), tables.longest_round());
            let vacuum = vacuumer::run(store.clone(), config.vacuum, tables, vacuumer::EVERY, shutdown.clone(), beat);
            loops.push(tokio::spawn(vacuum));
        }
    }
    loops.extend([
        tokio::spawn(cron_materializer::run(
            store.clone(),
            plugins,
            config.clone(),
            wakeups.clone(),
            shutdown.clone(),
            materializer,
        )),
        tokio::spawn(promoter::run(store.clone(), config.clone(), wakeups.clone(), shutdown.clone(), promoter)),
        tokio::spawn(reclaimer::run(store, config, wakeups, shutdown, reclaimer)),
    ]);
    loops
}
