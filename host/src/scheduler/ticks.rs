//! A CRON job's ticks: from its cron expression ([`CronSchedule`]), or from a schedule plugin
//! (world `schedule-plugin`: business days, holiday calendars, market hours) asked for each
//! next tick in the job's local time. Both are placed in the job's timezone by the same rules
//! (see `schedule`): a local time in the spring-forward gap is skipped, one in the repeated
//! fall-back hour fires once, at its first occurrence.
//!
//! A plugin answers in whole local seconds, each strictly after the last tick: a job fires at
//! most once a second, however its plugin answers.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};
use chrono_tz::Tz;

use super::schedule::{place, CronSchedule, ScheduleError};
use crate::contract::LocalTime;
use crate::plugin::host::ReadyPlugin;
use crate::plugin::{PluginHost, PluginRef};
use crate::store::Job;

/// The CPU time one `next` call may take.
pub const NEXT_CPU: Duration = Duration::from_millis(500);
/// Answers asked for one tick at most: each answer in a gap or placed before the last tick asks
/// again from it.
const MAX_ASKS: usize = 32;

/// Where a job's ticks come from.
pub enum JobSchedule {
    Cron(CronSchedule),
    Plugin(PluginSchedule),
}

/// A schedule plugin, its spec for one job, and the job's timezone.
pub struct PluginSchedule {
    host: PluginHost,
    plugin: Arc<ReadyPlugin>,
    spec_json: String,
    timezone: Tz,
}

impl JobSchedule {
    /// A CRON job's schedule as stored.
    pub async fn of(job: &Job, plugins: &PluginHost) -> Result<Self, ScheduleError> {
        let zone = job.cron_timezone.as_deref().unwrap_or("UTC");
        match (job.schedule_ref(), &job.cron_expression) {
            (Some(plugin), _) => {
                let spec = job.schedule_spec.clone().unwrap_or_else(|| serde_json::json!({}));
                Ok(Self::Plugin(PluginSchedule::load(plugins, &plugin, &spec, zone).await?))
            }
            (None, Some(expression)) => Ok(Self::Cron(CronSchedule::parse(expression, zone)?)),
            (None, None) => Err(ScheduleError("the job has neither a cron expression nor a schedule plugin".into())),
        }
    }

    /// The first tick strictly after `after` (None: the schedule has no more).
    pub async fn next_after(&self, after: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ScheduleError> {
        match self {
            Self::Cron(cron) => Ok(cron.next_after(after)),
            Self::Plugin(plugin) => plugin.next_after(after).await,
        }
    }

    /// Up to `limit` ticks from `first` on (`first` itself the first of them, as a job's next
    /// tick is), each before `ends` when the job has an end, for at most `deadline` (a schedule
    /// plugin may take `NEXT_CPU` a tick). Whether the deadline cut the list short.
    pub async fn upcoming(
        &self,
        first: DateTime<Utc>,
        ends: Option<DateTime<Utc>>,
        limit: usize,
        deadline: Duration,
    ) -> Result<(Vec<DateTime<Utc>>, bool), ScheduleError> {
        let started = tokio::time::Instant::now();
        let (mut ticks, mut at) = (Vec::new(), first);
        while ticks.len() < limit && ends.is_none_or(|end| at < end) {
            ticks.push(at);
            if ticks.len() == limit {
                break;
            }
            let Some(left) = deadline.checked_sub(started.elapsed()) else { return Ok((ticks, true)) };
            match tokio::time::timeout(left, self.next_after(at)).await {
                Ok(Ok(Some(next))) => at = next,
                Ok(Ok(None)) => break,
                Ok(Err(error)) => return Err(error),
                Err(_) => return Ok((ticks, true)),
            }
        }
        Ok((ticks, false))
    }
}

impl PluginSchedule {
    /// `plugin`, ready to call for a job with `spec` in `timezone`.
    pub async fn load(
        host: &PluginHost,
        plugin: &PluginRef,
        spec: &serde_json::Value,
        timezone: &str,
    ) -> Result<Self, ScheduleError> {
        let timezone: Tz = timezone.parse().map_err(|_| {
            ScheduleError(format!("`{timezone}` is not an IANA timezone name (like `Asia/Kolkata` or `UTC`)"))
        })?;
        let ready = host.get(plugin).await.map_err(|e| ScheduleError(format!("schedule plugin '{plugin}': {e}")))?;
        Ok(Self { host: host.clone(), plugin: ready, spec_json: spec.to_string(), timezone })
    }

    /// Ask the plugin `check` the spec.
    pub async fn check(&self) -> Result<(), ScheduleError> {
        let runtime = &self.host.runtime;
        match runtime.check_schedule(&self.plugin.loaded, &self.plugin.limits, self.spec_json.clone()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(ScheduleError(message.chars().take(1024).collect())),
            Err(error) => Err(ScheduleError(format!("the plugin could not check it: {error}"))),
        }
    }

    async fn next_after(&self, after: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ScheduleError> {
        let name = &self.plugin.record.name;
        let refused = |why: String| ScheduleError(format!("schedule plugin '{name}': {why}"));
        let mut from = after.with_timezone(&self.timezone).naive_local().with_nanosecond(0).expect("0 is valid");
        for _ in 0..MAX_ASKS {
            let answer = self
                .host
                .runtime
                .schedule_next(&self.plugin.loaded, &self.plugin.limits, &self.spec_json, local_time(from), NEXT_CPU)
                .await
                .map_err(refused)?;
            let Some(answer) = answer else { return Ok(None) };
            let local =
                naive(&answer).ok_or_else(|| refused(format!("answered {answer:?}, which is no date and time")))?;
            if local <= from {
                return Err(refused(format!("answered {local}, which is not after {from}")));
            }
            match place(self.timezone, local) {
                Some(at) if at > after => return Ok(Some(at)),
                // In the gap, or the repeated hour's first occurrence already passed: the next.
                _ => from = local,
            }
        }
        Err(refused(format!("gave no tick that can be placed in {} in {MAX_ASKS} answers", self.timezone)))
    }
}

/// A wall-clock time as the WIT record carries it.
pub fn local_time(t: NaiveDateTime) -> LocalTime {
    let narrow = |n: u32| u8::try_from(n).expect("a month, day, hour, minute or second fits");
    LocalTime {
        year: t.year(),
        month: narrow(t.month()),
        day: narrow(t.day()),
        hour: narrow(t.hour()),
        minute: narrow(t.minute()),
        second: narrow(t.second()),
        weekday: narrow(t.weekday().number_from_monday()),
    }
}

/// The record's date and time (its weekday is not read), if it is one.
pub fn naive(t: &LocalTime) -> Option<NaiveDateTime> {
    NaiveDate::from_ymd_opt(t.year, u32::from(t.month), u32::from(t.day))?.and_hms_opt(
        u32::from(t.hour),
        u32::from(t.minute),
        u32::from(t.second),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_times_cross_the_boundary_both_ways() {
        let t = NaiveDate::from_ymd_opt(2026, 11, 24).unwrap().and_hms_opt(9, 30, 5).unwrap();
        let record = local_time(t);
        assert_eq!((record.weekday, record.month, record.second), (2, 11, 5), "a Tuesday");
        assert_eq!(naive(&record), Some(t));
        assert_eq!(naive(&LocalTime { month: 2, day: 30, ..record }), None);
    }
}
