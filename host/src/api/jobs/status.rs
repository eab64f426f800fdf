//! `GET /jobs/{id}/status`: what a job is doing now and how it did over the last 24 hours.

use axum::extract::{Path, State};
use axum::Json;

use super::load;
use super::responses::{
    ActiveExecutionsOut, JobStatusOut, LastExecutionOut, SlaOut, StatsOut, StatusCronOut, WindowStatsOut,
};
use crate::api::error::ApiResult;
use crate::api::state::AppState;
use crate::domain::Scope;
use crate::ids::JobId;
use crate::store::now;

/// Health thresholds over the last 24 hours of completed executions.
pub fn health(total: usize, failed: usize) -> &'static str {
    if total == 0 {
        return "IDLE";
    }
    let failure_rate = failed as f64 / total as f64;
    if failure_rate < 0.10 {
        "HEALTHY"
    } else if failure_rate < 0.50 {
        "DEGRADED"
    } else {
        "FAILING"
    }
}

/// What a job is doing now and how it did over the last 24 hours.
#[utoipa::path(get, path = "/jobs/{job_id}/status", tag = "jobs", params(("job_id" = String, Path, description = "The job's id (`job_…`).")), responses(
    (status = 200, description = "What the job is doing now and how it did over the last 24 hours.", body = JobStatusOut),
))]
pub async fn status(
    State(state): State<AppState>,
    scope: Scope,
    Path(job_id): Path<JobId>,
) -> ApiResult<Json<JobStatusOut>> {
    let job = load(&state, &scope, &job_id).await?;
    let stats = state.store.job_stats(&job_id, now() - chrono::Duration::hours(24)).await?;
    let last = state.store.execution_last(&job_id).await?;
    let failed = usize::try_from(stats.failed).unwrap_or(0);
    let total = failed + usize::try_from(stats.succeeded).unwrap_or(0);
    // Over the newest completions (at most JobStats::SAMPLE), so the work is bounded.
    let mut durations = stats.recent_durations;
    durations.sort_unstable();
    let p99 = durations.get(((durations.len() as f64 - 1.0) * 0.99).round().max(0.0) as usize).map(|d| i64::from(*d));
    let pending = stats.pending + stats.queued + stats.retrying;
    Ok(Json(JobStatusOut {
        health: health(total, failed),
        last_execution: last.as_ref().map(LastExecutionOut::from),
        active_executions: ActiveExecutionsOut { pending, running: stats.running, total: pending + stats.running },
        stats: StatsOut {
            last_24h: WindowStatsOut {
                total,
                succeeded: total - failed,
                failed,
                avg_duration_ms: stats.avg_duration_ms.map(|a| a.round() as i64),
                p99_duration_ms: p99,
                sla: job.sla_ms.map(|sla_ms| {
                    let lateness = &stats.recent_lateness_ms;
                    let met = lateness.iter().filter(|l| **l <= i64::from(sla_ms)).count();
                    SlaOut {
                        sla_ms,
                        started: lateness.len(),
                        met,
                        ratio: (!lateness.is_empty()).then(|| met as f64 / lateness.len() as f64),
                        max_lateness_ms: lateness.iter().max().copied(),
                    }
                }),
            },
        },
        cron: StatusCronOut::new(&job),
        job_id: job.job_id,
        endpoint: crate::domain::tenant::own_name(&job.endpoint).to_owned(),
        endpoint_type: job.endpoint_type,
        trigger: job.trigger_type,
        status: job.status,
        version: job.version,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_thresholds() {
        assert_eq!(health(0, 0), "IDLE");
        assert_eq!(health(100, 9), "HEALTHY");
        assert_eq!(health(100, 10), "DEGRADED");
        assert_eq!(health(100, 49), "DEGRADED");
        assert_eq!(health(100, 50), "FAILING");
    }
}
