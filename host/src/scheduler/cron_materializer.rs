//! Loop 1: cron ticks become executions.
//!
//! The loop sleeps until the earliest next tick of any active cron job (at most
//! `TE_CRON_TICK_INTERVAL_SEC`), and is woken early when a cron job is created or updated in
//! this process.
//!
//! Each due job gets its tick's execution, keyed `{job_id}_{tick epoch ms}` (so a tick is
//! never created twice), and its next tick is computed from the tick just made, not from now:
//! a scheduler that was down for N ticks catches up with N executions. The advance is a
//! compare-and-set on the old tick, so two schedulers never both advance one job.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::schedule::CronSchedule;
use super::{SchedulerConfig, Wakeups};
use crate::ids::{new_id, EXECUTION};
use crate::retry::RetryPolicy;
use crate::store::{now, CronAdvance, ExecutionWrite, Job, Store, StoreResult};

pub async fn run(store: Arc<dyn Store>, config: SchedulerConfig, wakeups: Wakeups, shutdown: CancellationToken) {
    loop {
        match materialize_due(&store, now(), config.cron_batch_size, &wakeups).await {
            Ok(0) => {}
            Ok(created) => tracing::debug!(created, "Materialized cron ticks."),
            Err(error) => tracing::warn!(%error, "Cron materialization failed; retrying next tick."),
        }
        // Sleep until the earliest next tick (at most the tick interval), so a minute's ticks are
        // materialized at the minute rather than up to an interval later.
        let sleep = match store.cron_next_due().await {
            Ok(Some(next)) => {
                (next - now()).to_std().unwrap_or(std::time::Duration::ZERO).min(config.cron_tick_interval)
            }
            Ok(None) => config.cron_tick_interval,
            Err(error) => {
                tracing::warn!(%error, "Could not read the next cron tick.");
                config.cron_tick_interval
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(sleep) => {}
            () = wakeups.schedule_changed.notified() => {}
        }
    }
}

/// The idempotency key of a tick's execution.
pub fn tick_key(job_id: &str, tick: DateTime<Utc>) -> String {
    format!("{job_id}_{}", tick.timestamp_millis())
}

/// Materialize every tick due at `now`, catching up missed ones; the number of executions
/// made. Each batch of due jobs is advanced in one transaction, and workers are woken as soon
/// as a batch is written rather than after the whole pass.
pub async fn materialize_due(
    store: &Arc<dyn Store>,
    now: DateTime<Utc>,
    batch: i64,
    wakeups: &Wakeups,
) -> StoreResult<usize> {
    let mut created = 0;
    // Retry policies per endpoint and parsed schedules per (expression, zone), once per pass.
    let mut max_attempts: HashMap<String, i32> = HashMap::new();
    let mut schedules: HashMap<(String, String), Option<CronSchedule>> = HashMap::new();
    loop {
        let due = store.cron_due(now, batch).await?;
        if due.is_empty() {
            return Ok(created);
        }
        let mut advances = Vec::with_capacity(due.len());
        for job in &due {
            let attempts = match max_attempts.get(&job.endpoint) {
                Some(n) => *n,
                None => {
                    let n = match store.endpoint_get(&job.endpoint).await? {
                        Some(e) => {
                            RetryPolicy::parse(Some(&e.retry_policy)).map(|p| p.max_attempts as i32).unwrap_or(1)
                        }
                        None => 1,
                    };
                    max_attempts.insert(job.endpoint.clone(), n);
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
        let made = advances.iter().zip(&recorded).filter(|(a, won)| **won && a.execution.is_some()).count();
        if made > 0 {
            wakeups.work_ready(store).await;
        }
        created += made;
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
        execution_id: new_id(EXECUTION),
        job_id: job.job_id.clone(),
        endpoint: job.endpoint.clone(),
        endpoint_type: job.endpoint_type.clone(),
        idempotency_key: Some(tick_key(&job.job_id, tick)),
        status: "QUEUED",
        input: job.input.clone().unwrap_or_default(),
        max_attempts,
        run_at: tick,
        created_at: now,
    });
    let next = schedule.next_after(tick).filter(before_end);
    Some(CronAdvance { job_id: job.job_id.clone(), tick, next, execution })
}
