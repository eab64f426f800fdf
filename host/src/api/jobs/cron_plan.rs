//! A cron job's schedule as the API receives it: checked, and its first tick found.

use chrono::{DateTime, Utc};

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::scheduler::schedule::CronSchedule;

/// A parsed cron job schedule and its first tick.
pub struct CronPlan {
    pub expression: String,
    pub timezone: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: Option<DateTime<Utc>>,
    pub next_run_at: DateTime<Utc>,
}

pub fn plan_cron(
    expression: Option<String>,
    timezone: Option<String>,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> ApiResult<CronPlan> {
    let expression = expression.ok_or_else(|| ApiError::invalid_field("cron", "is required for a CRON job"))?;
    let timezone = timezone.ok_or_else(|| {
        ApiError::invalid_field("timezone", "is required for a CRON job (an IANA name such as `UTC`)")
    })?;
    let schedule =
        CronSchedule::parse(&expression, &timezone).map_err(|e| ApiError::new(ErrorCode::InvalidCron, e.0))?;
    let starts_at = starts_at.unwrap_or(at);
    if let Some(end) = ends_at {
        if end <= starts_at {
            return Err(ApiError::invalid_field("ends_at", "must be after starts_at"));
        }
    }
    // The first tick at or after the later of starts_at and now.
    let from = starts_at.max(at) - chrono::Duration::milliseconds(1);
    let next_run_at = schedule.next_after(from).filter(|t| ends_at.is_none_or(|end| *t < end)).ok_or_else(|| {
        ApiError::new(ErrorCode::InvalidCron, format!("`{expression}` has no tick between starts_at and ends_at"))
    })?;
    Ok(CronPlan { expression, timezone, starts_at, ends_at, next_run_at })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::jobs::responses::local;

    #[test]
    fn cron_plan_first_tick_and_bounds() {
        let at = DateTime::parse_from_rfc3339("2026-03-15T10:00:00Z").unwrap().with_timezone(&Utc);
        let plan = plan_cron(Some("0 9 * * MON".into()), Some("Asia/Kolkata".into()), Some(at), None, at).ok().unwrap();
        assert_eq!(local(&plan.next_run_at, Some("Asia/Kolkata")), "2026-03-16T09:00:00+05:30");
        let err = plan_cron(
            Some("0 9 * * MON".into()),
            Some("UTC".into()),
            Some(at),
            Some(at + chrono::Duration::hours(1)),
            at,
        )
        .err()
        .unwrap();
        assert_eq!(err.code, ErrorCode::InvalidCron);
        assert_eq!(plan_cron(None, Some("UTC".into()), None, None, at).err().unwrap().code.status(), 400);
    }
}
