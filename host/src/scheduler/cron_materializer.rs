//! Loop 1: cron ticks become executions, shortly before they are due.
//!
//! A tick is materialized up to `TE_CRON_LOOKAHEAD_SEC` ahead of its time, as a PENDING
//! execution whose `run_at` is the tick; the promoter releases it at that instant. The database
//! work of a busy minute (10,000 jobs advancing and 10,000 executions inserted) is then done in
//! the seconds before the boundary, and at the boundary only claiming and delivering remain.
//! A job has at most one tick waiting ahead: its next is made once that one is released.
//!
//! Each tick's execution is keyed `{job_id}_{tick epoch ms}` (so a tick is never created twice),
//! and the job's next tick is computed from the tick just made, not from now: a scheduler that
//! was down for N ticks catches up with N executions. The advance is a compare-and-set on the old
//! tick, so two schedulers never both advance one job. Retiring a job cancels its waiting tick.
//!
//! The loop sleeps until the earliest next tick less the lookahead (at most
//! `TE_CRON_TICK_INTERVAL_SEC`), and is woken early when a cron job is created or updated, or a
//! waiting tick is released, in this process.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::schedule::CronSchedule;
use super::{SchedulerConfig, Wakeups};
use crate::domain::ExecutionStatus;
use crate::health::Beat;
use crate::ids::ExecutionId;
use crate::retry::RetryPolicy;
use crate::store::{now, CronAdvance, ExecutionWrite, Job, Store, StoreResult};

pub async fn run(
    store: Arc<dyn Store>,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    beat: Beat,
) {
    let lookahead = chrono::Duration::from_std(config.cron_lookahead).unwrap_or_default();
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let made = materialize_due(&store, now(), lookahead, config.cron_batch_size, &wakeups).await;
        crate::metrics::loop_round("cron_materializer", round.elapsed(), made.is_err());
        match made {
            Ok(0) => {}
            Ok(created) => tracing::debug!(created, "Materialized cron ticks."),
            Err(error) => tracing::warn!(%error, "Cron materialization failed; retrying next tick."),
        }
        let sleep = match store.cron_next_due(now()).await {
            Ok(Some(next)) => {
                (next - lookahead - now()).to_std().unwrap_or(Duration::ZERO).min(config.cron_tick_interval)
            }
            Ok(None) => config.cron_tick_interval,
            Err(error) => {
                tracing::warn!(%error, "Could not read the next cron tick.");
                config.cron_tick_interval
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(sleep) => {}
            () = wakeups.cron_changed.notified() => {}
        }
    }
    beat.stopped();
}

/// The idempotency key of a tick's execution.
pub fn tick_key(job_id: &str, tick: DateTime<Utc>) -> String {
    format!("{job_id}_{}", tick.timestamp_millis())
}

/// Materialize every tick due by `now + lookahead` (ticks still ahead of `now` as PENDING),
/// catching up missed ones; the number of executions made. Each batch of due jobs is advanced
/// in one transaction, and workers (or the promoter) are woken as soon as a batch is written
/// rather than after the whole pass.
pub async fn materialize_due(
    store: &Arc<dyn Store>,
    now: DateTime<Utc>,
    lookahead: chrono::Duration,
    batch: i64,
    wakeups: &Wakeups,
) -> StoreResult<usize> {
    let mut created = 0;
    // Retry policies per endpoint version and parsed schedules per (expression, zone), once
    // per pass.
    let mut max_attempts: HashMap<(String, Option<i32>), i32> = HashMap::new();
    let mut schedules: HashMap<(String, String), Option<CronSchedule>> = HashMap::new();
    loop {
        let due = store.cron_due(now, now + lookahead, batch).await?;
        if due.is_empty() {
            return Ok(created);
        }
        let mut advances = Vec::with_capacity(due.len());
        for job in &due {
            let version_key = (job.endpoint.clone(), job.endpoint_version);
            let attempts = match max_attempts.get(&version_key) {
                Some(n) => *n,
                None => {
                    let n = match store.endpoint_for_job(&job.endpoint, job.endpoint_version).await? {
                        Some(e) => {
                            RetryPolicy::parse(Some(&e.retry_policy)).map(|p| p.max_attempts as i32).unwrap_or(1)
                        }
                        None => 1,
                    };
                    max_attempts.insert(version_key, n);
                    n
                }
            };
            let (Some(expression), Some(zone)) = (&job.cron_expression, &job.cron_timezone) else { continue };
            let schedule = schedules.entry((expression.clone(), zone.clone())).or_insert_with(|| match CronSchedule::parse(expression, zone) {
                Ok(schedule) => Some(schedule),
                Err(error) => {
                    // Validated at creation; a change of the cron crate could still refuse it later.
                    tracing::error!(job_id = %job.job_id, error = %error.0, "A stored cron expression no longer parses; skipping the job.");
                    None
                }
            });
            if let Some(schedule) = schedule {
                advances.extend(plan_tick(job, schedule, attempts, now));
            }
        }
        let recorded = store.cron_advance_many(&advances).await?;
        let made: Vec<&ExecutionWrite> =
            advances.iter().zip(&recorded).filter(|(_, won)| **won).filter_map(|(a, _)| a.execution.as_ref()).collect();
        if made.iter().any(|e| e.status == ExecutionStatus::Queued) {
            wakeups.work_ready(store).await;
        }
        if made.iter().any(|e| e.status == ExecutionStatus::Pending) {
            wakeups.pending_changed.notify_one();
        }
        created += made.len();
        // Another scheduler advanced everything we saw: let it carry on.
        if !recorded.iter().any(|won| *won) {
            return Ok(created);
        }
    }
}

/// The advance for a job's due tick: its execution (none when the tick is past `ends_at`) and
/// the tick after it (none when the schedule is over).
fn plan_tick(job: &Job, schedule: &CronSchedule, max_attempts: i32, now: DateTime<Utc>) -> Option<CronAdvance> {
    let tick = job.cron_next_run_at?;
    let before_end = |t: &DateTime<Utc>| job.cron_ends_at.is_none_or(|end| *t < end);
    let execution = before_end(&tick).then(|| ExecutionWrite {
        execution_id: ExecutionId::new(),
        job_id: job.job_id.clone(),
        endpoint: job.endpoint.clone(),
        endpoint_version: job.endpoint_version,
        endpoint_type: job.endpoint_type,
        idempotency_key: Some(tick_key(&job.job_id, tick)),
        // A tick still ahead waits for the promoter; a due (or missed) one is claimable now.
        status: if tick > now { ExecutionStatus::Pending } else { ExecutionStatus::Queued },
        input: job.input.clone().unwrap_or_default(),
        max_attempts,
        run_at: tick,
        created_at: now,
        trace_parent: job.trace_parent.clone(),
        retry_of: None,
    });
    let next = schedule.next_after(tick).filter(before_end);
    Some(CronAdvance { job_id: job.job_id.clone(), tick, next, execution })
}
