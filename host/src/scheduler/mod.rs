//! The scheduler role: three loops, each idempotent, so any number of scheduler processes can
//! run against one database without leader election.
//!
//! - [`cron_materializer`]: turns due cron ticks into executions (unique keys + compare-and-set).
//! - [`promoter`]: PENDING executions whose `run_at` has come become QUEUED.
//! - [`reclaimer`]: RUNNING executions whose worker vanished become RETRYING or FAILED.

pub mod cron_materializer;
pub mod promoter;
pub mod reclaimer;
pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub cron_tick_interval: Duration,
    pub cron_batch_size: i64,
    pub promote_interval: Duration,
    pub reclaim_interval: Duration,
    pub stuck_execution_timeout: Duration,
}

/// Signals between the roles of one process.
#[derive(Debug, Clone, Default)]
pub struct Wakeups {
    /// Work became claimable: wakes this process's worker.
    pub work_ready: Arc<Notify>,
    /// A new delayed execution or cron job may be due sooner than the scheduler planned.
    pub schedule_changed: Arc<Notify>,
}

impl Wakeups {
    /// Tell this process's worker, and (through the store) other processes', that work is ready.
    pub async fn work_ready(&self, store: &dyn Store) {
        self.work_ready.notify_one();
        if let Err(error) = store.work_notify().await {
            tracing::warn!(%error, "Could not notify other processes of new work; their workers will poll.");
        }
    }
}

pub fn spawn(
    store: Arc<dyn Store>,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
) -> Vec<JoinHandle<()>> {
    vec![
        tokio::spawn(cron_materializer::run(store.clone(), config.clone(), wakeups.clone(), shutdown.clone())),
        tokio::spawn(promoter::run(store.clone(), config.clone(), wakeups.clone(), shutdown.clone())),
        tokio::spawn(reclaimer::run(store, config, wakeups, shutdown)),
    ]
}
