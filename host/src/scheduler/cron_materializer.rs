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
//! was down for N ticks catches up with N executions, as far as the job's catch-up policy
//! says (`catchup_policy` all | latest | none, `catchup_window`: see [`catch_up`]). A job with
//! an overlap policy other than `allow` has every tick made PENDING, for the promoter to apply
//! the policy when the tick is due. The advance is a compare-and-set on the old
//! tick, so two schedulers never both advance one job. Retiring a job cancels its waiting tick.
//!
//! The loop sleeps until the earliest next tick less the lookahead, or the time of the earliest
//! tick it made that is still waiting (its job's next is made then), at most
//! `TE_CRON_TICK_INTERVAL_SEC`; it is woken early when a cron job is created, updated or
//! resumed (in this process, or in another through a PostgreSQL NOTIFY), or a waiting tick is
//! released in this process. (Without the wake at a waiting tick's time, a per-second job's
//! next tick was made anywhere in the second after it, down to 17 ms before its own time,
//! too late to be promoted and claimed ahead: the soak's cron lateness, docs/benchmarks.md.)

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::schedule::ScheduleError;
use super::ticks::JobSchedule;
use super::{SchedulerConfig, Wakeups};
use crate::domain::{CatchupPolicy, ExecutionStatus, OverlapPolicy, TriggerReason};
use crate::flow::Concurrency;
use crate::health::Beat;
use crate::ids::ExecutionId;
use crate::plugin::{PluginHost, PluginRef};
use crate::retry::RetryPolicy;
use crate::store::{now, CronAdvance, ExecutionWrite, Job, Signal, Store, StoreResult};

pub async fn run(
    store: Arc<dyn Store>,
    plugins: PluginHost,
    config: SchedulerConfig,
    wakeups: Wakeups,
    shutdown: CancellationToken,
    beat: Beat,
) {
    let lookahead = chrono::Duration::from_std(config.cron_lookahead).unwrap_or_default();
    // Cron jobs created or changed through other processes wake this loop too.
    match store.listen(&[(Signal::CronChanged, wakeups.cron_changed.clone())]).await {
        Ok(true) => tracing::info!("Cron materializer listens for cron job changes (LISTEN/NOTIFY)."),
        Ok(false) => {}
        Err(error) => tracing::warn!(%error, "Could not LISTEN for cron job changes; they are seen at the next pass."),
    }
    // The times of the ticks this loop made that are still ahead: at each, its job's next
    // tick may be made (`Schedules::cron_due` holds a job back until its last tick's time).
    let mut waiting: BTreeSet<DateTime<Utc>> = BTreeSet::new();
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let made =
            materialize_due(&store, &plugins, now(), lookahead, config.cron_batch_size, &wakeups, &mut waiting).await;
        crate::metrics::loop_round("cron_materializer", round.elapsed(), made.is_err());
        match made {
            Ok(0) => {}
            Ok(created) => tracing::debug!(created, "Materialized cron ticks."),
            Err(error) => tracing::warn!(%error, "Cron materialization failed; retrying next tick."),
        }
        let at = now();
        waiting = waiting.split_off(&(at + chrono::Duration::microseconds(1)));
        let mut sleep = match store.cron_next_due(at).await {
            Ok(Some(next)) => (next - lookahead - at).to_std().unwrap_or(Duration::ZERO).min(config.cron_tick_interval),
            Ok(None) => config.cron_tick_interval,
            Err(error) => {
                tracing::warn!(%error, "Could not read the next cron tick.");
                config.cron_tick_interval
            }
        };
        if let Some(first) = waiting.first() {
            sleep = sleep.min((*first - at).to_std().unwrap_or(Duration::ZERO));
        }
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
/// catching up missed ones; the number of executions made. The times of those made ahead go
/// into `waiting`. Each batch of due jobs is advanced in one transaction, and workers (or the
/// promoter) are woken as soon as a batch is written rather than after the whole pass.
pub async fn materialize_due(
    store: &Arc<dyn Store>,
    plugins: &PluginHost,
    now: DateTime<Utc>,
    lookahead: chrono::Duration,
    batch: i64,
    wakeups: &Wakeups,
    waiting: &mut BTreeSet<DateTime<Utc>>,
) -> StoreResult<usize> {
    let mut created = 0;
    // Retry policies and concurrency keys per endpoint version, and schedules (parsed, or
    // their plugin loaded), once per pass.
    let mut deliveries: HashMap<(String, Option<i32>), (i32, Option<Concurrency>)> = HashMap::new();
    let mut schedules: HashMap<ScheduleKey, Option<JobSchedule>> = HashMap::new();
    loop {
        let due = store.cron_due(now, now + lookahead, batch).await?;
        if due.is_empty() {
            return Ok(created);
        }
        // Ticks are planned by the clock as of this read, not the pass's start: a job resumed
        // while the read waited (on SQLite's lock, say) would otherwise have its catch-up
        // planned for a moment before its resume, and under `latest` make a missed tick older
        // than the newest one due (seen in e2e_schedules as a tick one second too old).
        let now = crate::store::now().max(now);
        let mut advances = Vec::with_capacity(due.len());
        for job in &due {
            let version_key = (job.endpoint.clone(), job.endpoint_version);
            let (attempts, concurrency) = match deliveries.get(&version_key) {
                Some(known) => known.clone(),
                None => {
                    let known = match store.endpoint_for_job(&job.endpoint, job.endpoint_version).await? {
                        Some(e) => (RetryPolicy::attempts_allowed(&e.retry_policy), e.concurrency),
                        None => (1, None),
                    };
                    deliveries.insert(version_key, known.clone());
                    known
                }
            };
            let key = ScheduleKey::of(job);
            if !schedules.contains_key(&key) {
                let schedule = match JobSchedule::of(job, plugins).await {
                    Ok(schedule) => Some(schedule),
                    Err(error) => {
                        // Checked at creation; a plugin since removed or a change of the cron
                        // crate could still refuse it later.
                        tracing::error!(job_id = %job.job_id, error = %error.0, "A cron job's schedule cannot be used; skipping the job.");
                        None
                    }
                };
                schedules.insert(key.clone(), schedule);
            }
            if let Some(schedule) = &schedules[&key] {
                match plan_tick(job, schedule, attempts, now).await {
                    Ok(advance) => advances.extend(advance.map(|mut advance| {
                        advance.execution = advance.execution.map(|e| e.keyed(concurrency.as_ref()));
                        advance
                    })),
                    Err(error) => {
                        tracing::error!(job_id = %job.job_id, error = %error.0, "The job's next tick could not be computed; skipping it this round.")
                    }
                }
            }
        }
        let recorded = store.cron_advance_many(&advances).await?;
        let made: Vec<&ExecutionWrite> =
            advances.iter().zip(&recorded).filter(|(_, won)| **won).filter_map(|(a, _)| a.execution.as_ref()).collect();
        wakeups.executions_written(store, made.iter().map(|e| e.wakes())).await;
        waiting.extend(made.iter().map(|e| e.run_at).filter(|t| *t > now));
        created += made.len();
        // Another scheduler advanced everything we saw: let it carry on.
        if !recorded.iter().any(|won| *won) {
            return Ok(created);
        }
    }
}

/// What a job's schedule is made from: equal keys make equal schedules.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ScheduleKey {
    expression: Option<String>,
    timezone: Option<String>,
    plugin: Option<PluginRef>,
    spec: Option<String>,
}

impl ScheduleKey {
    fn of(job: &Job) -> Self {
        Self {
            expression: job.cron_expression.clone(),
            timezone: job.cron_timezone.clone(),
            plugin: job.schedule_ref(),
            spec: job.schedule_spec.as_ref().map(ToString::to_string),
        }
    }
}

/// The advance for a job's due tick: its execution (none when the tick is past `ends_at`, or
/// skipped by the catch-up policy) and the tick after it (none when the schedule is over).
async fn plan_tick(
    job: &Job,
    schedule: &JobSchedule,
    max_attempts: i32,
    now: DateTime<Utc>,
) -> Result<Option<CronAdvance>, ScheduleError> {
    let Some(tick) = job.cron_next_run_at else { return Ok(None) };
    let before_end = |t: &DateTime<Utc>| job.cron_ends_at.is_none_or(|end| *t < end);
    let (made, last, skipped_to) = match catch_up(job, schedule, tick, now).await? {
        CatchUp::Make(t) => (Some(t), t, None),
        CatchUp::SkipTo(next) => (None, tick, next),
    };
    let execution = made.filter(before_end).map(|made| tick_execution(job, made, max_attempts, now, None));
    let next = match made {
        Some(made) => schedule.next_after(made).await?,
        None => skipped_to,
    }
    .filter(before_end);
    Ok(Some(CronAdvance { job_id: job.job_id.clone(), tick, last, next, execution }))
}

/// The execution of `job`'s tick at `tick`, made at `now`, fired at the tick plus the job's
/// jitter (`super::jitter`); keyed by the tick ([`tick_key`]), so a tick is never made twice
/// however it is asked for (the schedule, or a backfill of a past range). `reason`: None for
/// the schedule's own ticks, under the job's overlap policy; else why it is made outside the
/// schedule (due now, not in the past) and the overlap policy it is made under.
pub fn tick_execution(
    job: &Job,
    tick: DateTime<Utc>,
    max_attempts: i32,
    now: DateTime<Utc>,
    reason: Option<(TriggerReason, OverlapPolicy)>,
) -> ExecutionWrite {
    let policy = reason.map_or(job.overlap_policy, |(_, policy)| policy);
    let overlap = (policy != OverlapPolicy::Allow).then_some(policy);
    let run_at = super::jitter::fires_at(&job.job_id, tick, job.cron_jitter_ms).max(match reason {
        // A backfilled tick is due now: its time passed before it was asked for.
        Some(_) => now,
        None => tick,
    });
    ExecutionWrite {
        execution_id: ExecutionId::new(),
        job_id: job.job_id.clone(),
        endpoint: job.endpoint.clone(),
        endpoint_version: job.endpoint_version,
        endpoint_type: job.endpoint_type,
        idempotency_key: Some(tick_key(&job.job_id, tick)),
        // A tick still ahead waits for the promoter; a due (or missed) one is claimable now,
        // unless its job's overlap policy is to be applied when it is due (the promoter's).
        status: if run_at > now || overlap.is_some() { ExecutionStatus::Pending } else { ExecutionStatus::Queued },
        input: job.input.clone().unwrap_or_default(),
        max_attempts,
        run_at,
        created_at: now,
        trace_parent: job.trace_parent.clone(),
        retry_of: None,
        overlap_policy: overlap,
        sla_ms: job.sla_ms,
        trigger_reason: reason.map(|(reason, _)| reason),
        expires_at: None,
        on_success: job.on_success.clone(),
        concurrency_key: None,
        concurrency_limit: None,
    }
}

/// What the catch-up policy makes of a job's next tick.
#[derive(Debug, PartialEq, Eq)]
enum CatchUp {
    /// Make this tick (the one read, or under `latest` the newest due one).
    Make(DateTime<Utc>),
    /// Make nothing: every tick before this one is too late (None: and none is left).
    SkipTo(Option<DateTime<Utc>>),
}

/// How late a `none` job's tick may be and still fire, unless it sets its own window.
const NONE_DEFAULT_WINDOW_SEC: i32 = 60;
/// Ticks walked forward, at most, to find the newest due one under `latest`.
const LATEST_WALK_LIMIT: usize = 100_000;

/// A tick more than the job's catch-up window late is skipped, with every other one that late,
/// in one step; under `latest`, a due tick with a newer one also due gives way to the newest.
async fn catch_up(
    job: &Job,
    schedule: &JobSchedule,
    tick: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<CatchUp, ScheduleError> {
    let window = match (job.catchup_window_sec, job.catchup_policy) {
        (Some(seconds), _) => Some(seconds),
        (None, CatchupPolicy::None) => Some(NONE_DEFAULT_WINDOW_SEC),
        (None, _) => None,
    };
    let mut tick = tick;
    if let Some(seconds) = window {
        let oldest = now - chrono::Duration::seconds(i64::from(seconds));
        if tick < oldest {
            match schedule.next_after(oldest - chrono::Duration::microseconds(1)).await? {
                Some(first) if first <= now => tick = first,
                next => return Ok(CatchUp::SkipTo(next)),
            }
        }
    }
    if job.catchup_policy == CatchupPolicy::Latest {
        for _ in 0..LATEST_WALK_LIMIT {
            match schedule.next_after(tick).await? {
                Some(newer) if newer <= now => tick = newer,
                _ => break,
            }
        }
    }
    Ok(CatchUp::Make(tick))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EndpointType, JobStatus, Trigger};
    use crate::ids::JobId;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn job(policy: CatchupPolicy, window: Option<i32>) -> Job {
        Job {
            job_id: JobId::new(),
            endpoint: "e".into(),
            endpoint_version: Some(1),
            endpoint_type: EndpointType::Http,
            trigger_type: Trigger::Cron,
            status: JobStatus::Active,
            version: 1,
            previous_version_id: None,
            replaced_by_id: None,
            idempotency_key: None,
            input: None,
            run_at: None,
            cron_expression: None,
            cron_timezone: None,
            cron_starts_at: None,
            cron_ends_at: None,
            cron_next_run_at: None,
            cron_last_tick_at: None,
            cron_prev_tick_at: None,
            created_at: at("2026-01-01T00:00:00Z"),
            retired_at: None,
            trace_parent: None,
            paused_at: None,
            overlap_policy: OverlapPolicy::Allow,
            catchup_policy: policy,
            catchup_window_sec: window,
            sla_ms: None,
            on_failure: None,
            schedule_plugin: None,
            schedule_plugin_version: None,
            schedule_spec: None,
            cron_jitter_ms: None,
            expires_at: None,
            on_success: None,
        }
    }

    fn catch_up(job: &Job, schedule: &JobSchedule, tick: DateTime<Utc>, now: DateTime<Utc>) -> CatchUp {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(super::catch_up(job, schedule, tick, now)).unwrap()
    }

    fn cron(expression: &str) -> JobSchedule {
        JobSchedule::Cron(crate::scheduler::schedule::CronSchedule::parse(expression, "UTC").unwrap())
    }

    #[test]
    fn catch_up_policies_choose_which_missed_ticks_are_made() {
        let minutely = cron("0 * * * * *");
        let now = at("2026-03-02T10:05:30Z");
        let missed = at("2026-03-02T10:00:00Z");
        let make = |t: &str| CatchUp::Make(at(t));
        // all: every tick, however late (one per pass, each from the one before).
        assert_eq!(catch_up(&job(CatchupPolicy::All, None), &minutely, missed, now), make("2026-03-02T10:00:00Z"));
        // all within a window: the too-late ones are skipped in one step.
        assert_eq!(catch_up(&job(CatchupPolicy::All, Some(120)), &minutely, missed, now), make("2026-03-02T10:04:00Z"));
        // latest: only the newest due tick.
        assert_eq!(catch_up(&job(CatchupPolicy::Latest, None), &minutely, missed, now), make("2026-03-02T10:05:00Z"));
        // none: a tick more than 60 s late is skipped; one 30 s late still fires.
        assert_eq!(catch_up(&job(CatchupPolicy::None, None), &minutely, missed, now), make("2026-03-02T10:05:00Z"));
        let late = at("2026-03-02T10:05:00Z");
        assert_eq!(catch_up(&job(CatchupPolicy::None, None), &minutely, late, now), make("2026-03-02T10:05:00Z"));
        // A window with no due tick left in it: nothing is made, the schedule goes on from the next.
        let hourly = cron("0 0 * * * *");
        assert_eq!(
            catch_up(&job(CatchupPolicy::None, Some(60)), &hourly, at("2026-03-02T08:00:00Z"), now),
            CatchUp::SkipTo(Some(at("2026-03-02T11:00:00Z")))
        );
        // A tick on time is made under every policy.
        for policy in [CatchupPolicy::All, CatchupPolicy::Latest, CatchupPolicy::None] {
            let due = at("2026-03-02T10:06:00Z");
            assert_eq!(catch_up(&job(policy, Some(1)), &minutely, due, now), CatchUp::Make(due), "{policy}");
        }
    }
}
