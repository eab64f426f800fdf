//! A cron job's schedule as the API receives it — a cron expression, or a schedule plugin with
//! its spec — checked, and its first tick found.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::state::AppState;
use crate::domain::quotas::{OverQuota, Quota};
use crate::domain::Scope;
use crate::plugin::{PluginRef, World};
use crate::scheduler::schedule::CronSchedule;
use crate::scheduler::ticks::{JobSchedule, PluginSchedule};
use crate::store::Job;

/// A CRON job's ticks from a schedule plugin (world `schedule-plugin`), in place of `cron`:
/// business days, holiday calendars, market hours.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleIn {
    /// An installed schedule plugin: `name` (its newest version at each tick) or `name@3`.
    pub plugin: String,
    /// Passed to the plugin with each question (an object; `{}` when not given). The plugin
    /// checks it when the job is created or updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
}

impl ScheduleIn {
    /// The job's schedule plugin as the API shows it.
    pub fn of(job: &Job) -> Option<Self> {
        let plugin = job.schedule_ref()?.to_string();
        Some(Self { plugin, spec: Some(job.schedule_spec.clone().unwrap_or_else(|| serde_json::json!({}))) })
    }
}

/// A checked cron job schedule and its first tick.
pub struct CronPlan {
    /// One of the two: a cron expression, or a schedule plugin with its spec.
    pub expression: Option<String>,
    pub schedule: Option<(PluginRef, Value)>,
    pub timezone: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub next_run_at: DateTime<Utc>,
}

/// What a cron job's schedule is given as.
pub struct ScheduleAsked {
    pub cron: Option<String>,
    pub schedule: Option<ScheduleIn>,
    pub timezone: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

/// How many ticks after the first a tenant's `min_cron_interval_sec` is checked over.
const TICKS_CHECKED: usize = 16;

pub async fn plan_cron(
    state: &AppState,
    scope: &Scope,
    asked: ScheduleAsked,
    at: DateTime<Utc>,
) -> ApiResult<CronPlan> {
    let timezone = asked.timezone.ok_or_else(|| {
        ApiError::invalid_field("timezone", "is required for a CRON job (an IANA name such as `UTC`)")
    })?;
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidCron, message);
    let (schedule, expression, plugin) = match (asked.cron, asked.schedule) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_field("schedule", "cannot be given with `cron`: choose one"))
        }
        (None, None) => return Err(ApiError::invalid_field("cron", "is required for a CRON job (or give `schedule`)")),
        (Some(expression), None) => {
            let schedule = CronSchedule::parse(&expression, &timezone).map_err(|e| invalid(e.0))?;
            (JobSchedule::Cron(schedule), Some(expression), None)
        }
        (None, Some(given)) => {
            let plugin = PluginRef::parse(&given.plugin).map_err(|e| ApiError::invalid_field("schedule.plugin", e))?;
            let spec = given.spec.unwrap_or_else(|| serde_json::json!({}));
            if !spec.is_object() {
                return Err(ApiError::invalid_field("schedule.spec", "must be an object"));
            }
            crate::api::endpoints::require_plugin(state, "schedule.plugin", &plugin, World::Schedule).await?;
            let loaded = PluginSchedule::load(&state.plugins, &plugin, &spec, &timezone)
                .await
                .map_err(|e| invalid(format!("`schedule`: {}", e.0)))?;
            loaded
                .check()
                .await
                .map_err(|e| invalid(format!("`schedule.spec`: schedule plugin '{plugin}' refused it: {}", e.0)))?;
            (JobSchedule::Plugin(loaded), None, Some((plugin, spec)))
        }
    };
    let starts_at = asked.starts_at.unwrap_or(at);
    if let Some(end) = asked.ends_at {
        if end <= starts_at {
            return Err(ApiError::invalid_field("ends_at", "must be after starts_at"));
        }
    }
    // The first tick at or after the later of starts_at and now.
    let from = starts_at.max(at) - chrono::Duration::milliseconds(1);
    let first = schedule.next_after(from).await.map_err(|e| invalid(e.0))?;
    let next_run_at = first.filter(|t| asked.ends_at.is_none_or(|end| *t < end)).ok_or_else(|| {
        let what = match (&expression, &plugin) {
            (Some(expression), _) => format!("`{expression}`"),
            (None, Some((plugin, _))) => format!("schedule plugin '{plugin}'"),
            (None, None) => unreachable!("one of the two was given"),
        };
        invalid(format!("{what} has no tick between starts_at and ends_at"))
    })?;
    if let Some(least) = state.quotas.of(scope.tenant()).min_cron_interval_sec {
        let gap = shortest_gap(&schedule, next_run_at, asked.ends_at).await.map_err(|e| invalid(e.0))?;
        if let Some(gap) = gap.filter(|gap| gap.num_seconds() < i64::from(least)) {
            return Err(OverQuota {
                quota: Quota::MinCronIntervalSec,
                tenant: scope.tenant().to_owned(),
                limit: u64::from(least),
                wanted: u64::try_from(gap.num_seconds()).unwrap_or(0),
                retry_after: None,
            }
            .into());
        }
    }
    Ok(CronPlan { expression, schedule: plugin, timezone, starts_at, ends_at: asked.ends_at, next_run_at })
}

/// The shortest time between two of the schedule's ticks among the first [`TICKS_CHECKED`]
/// from `first` (before `ends_at`); None when it has no second tick.
async fn shortest_gap(
    schedule: &JobSchedule,
    first: DateTime<Utc>,
    ends_at: Option<DateTime<Utc>>,
) -> Result<Option<chrono::Duration>, crate::scheduler::schedule::ScheduleError> {
    let (mut shortest, mut tick) = (None::<chrono::Duration>, first);
    for _ in 0..TICKS_CHECKED {
        let Some(next) = schedule.next_after(tick).await?.filter(|t| ends_at.is_none_or(|end| *t < end)) else {
            break;
        };
        let gap = next - tick;
        shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
        tick = next;
    }
    Ok(shortest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::jobs::responses::local;

    #[test]
    fn a_cron_expressions_first_tick() {
        let at = DateTime::parse_from_rfc3339("2026-03-15T10:00:00Z").unwrap().with_timezone(&Utc);
        let schedule = CronSchedule::parse("0 9 * * MON", "Asia/Kolkata").unwrap();
        let first = schedule.next_after(at - chrono::Duration::milliseconds(1)).unwrap();
        assert_eq!(local(&first, Some("Asia/Kolkata")), "2026-03-16T09:00:00+05:30");
    }
}
