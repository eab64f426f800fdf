//! The answer to a create: the job as written, or for an idempotent repeat the first job
//! (a repeat that differs from it names the field, `409 CONFLICT`).

use super::*;

/// The answer to a create, as written: `201` and the job, or for an idempotent repeat `200` and
/// the first job (a repeat that differs is `409 CONFLICT`).
pub(in crate::api) async fn answer(
    state: &AppState,
    prepared: &Prepared,
    inserted: Inserted<Job>,
) -> ApiResult<Created<JobOut>> {
    let (job, execution) = (&prepared.new.job, &prepared.new.execution);
    let (status, job, first) = match inserted {
        Inserted::Created(job) => {
            crate::metrics::job_created(job.trigger_type.as_str(), job.endpoint_type.as_str(), &job.endpoint);
            // The execution just written is the job's first: no need to read it back.
            let first = execution.clone().map(|e| Execution {
                execution_id: e.execution_id,
                job_id: e.job_id,
                endpoint: e.endpoint,
                endpoint_version: e.endpoint_version,
                endpoint_type: e.endpoint_type,
                idempotency_key: e.idempotency_key,
                status: e.status,
                input: Some(e.input),
                output: None,
                attempt_count: 0,
                max_attempts: e.max_attempts,
                worker_id: None,
                run_at: e.run_at,
                started_at: None,
                completed_at: None,
                lease_expires_at: None,
                duration_ms: None,
                created_at: e.created_at,
                trace_parent: e.trace_parent,
                retry_of: None,
                scheduled_at: Some(e.run_at),
                claimed_at: None,
                sla_ms: e.sla_ms,
                trigger_reason: e.trigger_reason,
                expires_at: e.expires_at,
                abort_requested_at: None,
                on_success: e.on_success,
                concurrency_key: e.concurrency_key,
                concurrency_limit: e.concurrency_limit,
            });
            (StatusCode::CREATED, job, first)
        }
        Inserted::Existing(existing) => {
            if let Some(field) = differing_field(&existing, job, prepared.run_at_given) {
                return Err(ApiError::new(
                    ErrorCode::Conflict,
                    format!(
                        "idempotency_key '{}' was first used for job '{}' with a different `{field}`: repeat that request exactly to get its answer, or use a new key",
                        existing.idempotency_key.as_deref().unwrap_or_default(),
                        existing.job_id
                    ),
                ));
            }
            let job = existing;
            let first = state.store.execution_first(&job.job_id).await?;
            (StatusCode::OK, job, first)
        }
    };
    let created_status = initial_status(&job);
    Ok(Created(status, JobOut::new(&job, first.as_ref().map(|e| (e, Some(created_status))))))
}

/// The first field in which a repeated create differs from the job its idempotency key first
/// made, if any. A repeat must be the same request: answering it with the first job would
/// silently drop what changed. `starts_at` defaults to the time of each request, and a
/// `delay_ms` is relative to it, so neither is compared; `run_at` is, when it was given.
fn differing_field(existing: &Job, requested: &JobWrite, compare_run_at: bool) -> Option<&'static str> {
    let micros = |t: Option<DateTime<Utc>>| t.map(|t| t.timestamp_micros());
    if existing.trigger_type != requested.trigger_type {
        Some("trigger")
    } else if existing.input.as_ref() != Some(&requested.input) {
        Some("input")
    } else if compare_run_at && micros(existing.run_at) != micros(requested.run_at) {
        Some("run_at")
    } else if existing.cron_expression != requested.cron_expression {
        Some("cron")
    } else if (existing.schedule_ref(), existing.schedule_spec.as_ref())
        != (requested.schedule.clone(), requested.schedule_spec.as_ref())
    {
        Some("schedule")
    } else if existing.cron_timezone != requested.cron_timezone {
        Some("timezone")
    } else if existing.on_failure != requested.on_failure {
        Some("on_failure")
    } else if existing.on_success != requested.on_success {
        Some("on_success")
    } else if existing.sla_ms != requested.sla_ms {
        Some("sla_ms")
    } else if existing.overlap_policy != requested.overlap_policy {
        Some("overlap_policy")
    } else if (existing.catchup_policy, existing.catchup_window_sec)
        != (requested.catchup_policy, requested.catchup_window_sec)
    {
        Some("catchup_policy")
    } else if micros(existing.expires_at) != micros(requested.expires_at) {
        Some("expires_at")
    } else if existing.cron_jitter_ms != requested.cron_jitter_ms {
        Some("jitter_ms")
    } else {
        None
    }
}
