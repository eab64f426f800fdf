//! The statements of `store::postgres` that are built rather than written out: batch inserts
//! from one array per column, and the claim (what is written out is in `sql/postgres.sql`).

use std::sync::LazyLock;

use sqlx::postgres::PgArguments;
use sqlx::{Arguments, Postgres};

use super::super::engine::{EXECUTION_COLUMNS, QUEUED_ENDPOINTS};
use super::super::StoreResult;

// Batches of new rows travel as one array per column and UNNEST turns them back into rows:
// the statements' text stays the same whatever a batch's size, so each connection prepares
// them once (multi-row VALUES lists are a new statement for every size). Row-by-row inserts
// made a batch of 1,000 jobs two thousand statements.

/// The largest batch of new jobs written as one statement (`SqlBackend::jobs_write`).
pub(super) const ONE_STATEMENT_MAX_JOBS: usize = 32;

/// The element types of a job batch's arrays, in `JOB_WRITE_COLUMNS` order less `status`.
#[rustfmt::skip]
pub(super) const JOB_ARRAYS: [&str; 29] = [
    "text", "text", "text", "text", "int4", "text", "text", "jsonb", "timestamptz", "text", "text", "timestamptz",
    "timestamptz", "timestamptz", "timestamptz", "int4", "text", "timestamptz", "text", "text", "int4", "int4", "text",
    "text", "int4", "jsonb", "int4", "timestamptz", "text",
];

/// The element types of an execution batch's arrays, in `EXECUTION_INSERT`'s order less
/// `scheduled_at` (its first `run_at`).
#[rustfmt::skip]
pub(super) const EXECUTION_ARRAYS: [&str; 19] = [
    "text", "text", "text", "text", "text", "text", "jsonb", "int4", "timestamptz", "timestamptz", "int4", "text",
    "text", "text", "int4", "timestamptz", "text", "text", "int4",
];

pub(super) const EXECUTION_INSERT: &str = "INSERT INTO executions (execution_id, job_id, endpoint, endpoint_type, \
     idempotency_key, status, input, max_attempts, run_at, created_at, endpoint_version, trace_parent, retry_of, \
     overlap_policy, sla_ms, expires_at, on_success, concurrency_key, concurrency_limit, scheduled_at)";

/// An execution batch's rows (`v`) whose (job, idempotency key) no finished execution holds:
/// the key is unique only among unfinished ones when history is partitioned apart
/// (`store::partitions`), where a unique index turns a concurrent twin away (`EXECUTION_CONFLICT`).
pub(super) const EXECUTION_KEY_FREE: &str = "(v.idempotency_key IS NULL
     OR NOT EXISTS (SELECT 1 FROM executions x WHERE x.job_id = v.job_id AND x.idempotency_key = v.idempotency_key))";

/// No conflict target: whichever unique index a row meets, the table's or its partition's.
pub(super) const EXECUTION_CONFLICT: &str = "ON CONFLICT DO NOTHING";

/// `$first::type[], …` for each array of `types`.
pub(super) fn array_parameters(first: usize, types: &[&str]) -> String {
    let parameters: Vec<String> = types.iter().enumerate().map(|(i, t)| format!("${}::{t}[]", first + i)).collect();
    parameters.join(", ")
}

/// The batch's endpoints (`$2`, the jobs' endpoint array) held as a foreign key to them would
/// hold them, as the CTE `held`, for `jobs_from_arrays`.
pub(super) const HELD_ENDPOINTS: &str =
    "held AS MATERIALIZED (SELECT name FROM endpoints WHERE name = ANY($2::text[]) FOR KEY SHARE)";

/// The INSERT of a job batch from its arrays (`$1` onwards), in the batch's order, passing
/// over a taken (endpoint, idempotency key) and an endpoint not in `held`.
pub(super) fn jobs_from_arrays() -> String {
    format!(
        "INSERT INTO jobs ({})
         SELECT v.job_id, v.endpoint, v.endpoint_type, v.trigger_type, 'ACTIVE', v.version, v.previous_version_id,
             v.idempotency_key, v.input, v.run_at, v.cron_expression, v.cron_timezone, v.cron_starts_at,
             v.cron_ends_at, v.cron_next_run_at, v.created_at, v.endpoint_version, v.trace_parent, v.paused_at,
             v.overlap_policy, v.catchup_policy, v.catchup_window_sec, v.sla_ms, v.on_failure, v.schedule_plugin,
             v.schedule_plugin_version, v.schedule_spec, v.cron_jitter_ms, v.expires_at, v.on_success
         FROM UNNEST({}) WITH ORDINALITY
              AS v(job_id, endpoint, endpoint_type, trigger_type, version, previous_version_id, idempotency_key,
                   input, run_at, cron_expression, cron_timezone, cron_starts_at, cron_ends_at, cron_next_run_at,
                   created_at, endpoint_version, trace_parent, paused_at, overlap_policy, catchup_policy,
                   catchup_window_sec, sla_ms, on_failure, schedule_plugin, schedule_plugin_version, schedule_spec,
                   cron_jitter_ms, expires_at, on_success, n)
         WHERE v.endpoint IN (SELECT name FROM held)
         ORDER BY v.n
         ON CONFLICT (endpoint, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        super::super::engine::JOB_WRITE_COLUMNS,
        array_parameters(1, &JOB_ARRAYS)
    )
}

/// The rows of an execution batch from its arrays (`$first` onwards), as `v`, for
/// `EXECUTION_INSERT`.
pub(super) fn executions_from_arrays(first: usize) -> String {
    format!(
        "SELECT *, v.run_at FROM UNNEST({})
             AS v(execution_id, job_id, endpoint, endpoint_type, idempotency_key, status, input, max_attempts,
                  run_at, created_at, endpoint_version, trace_parent, retry_of, overlap_policy, sla_ms, expires_at,
                  on_success, concurrency_key, concurrency_limit)",
        array_parameters(first, &EXECUTION_ARRAYS)
    )
}

/// New executions from their arrays (`$1` onwards), each passed over when an execution of its
/// job already has its key (a cron tick recorded twice).
pub(super) static INSERT_EXECUTIONS: LazyLock<String> = LazyLock::new(|| {
    format!("{EXECUTION_INSERT} {} WHERE {EXECUTION_KEY_FREE} {EXECUTION_CONFLICT}", executions_from_arrays(1))
});

/// The first executions of jobs inserted in the same transaction, from their arrays (`$1`
/// onwards): no execution of those jobs can exist yet, so none is looked for.
pub(super) static INSERT_EXECUTIONS_OF_NEW_JOBS: LazyLock<String> =
    LazyLock::new(|| format!("{EXECUTION_INSERT} {} {EXECUTION_CONFLICT}", executions_from_arrays(1)));

/// New jobs from their arrays (`$1` onwards), returning the ids of those inserted.
pub(super) static INSERT_JOBS: LazyLock<String> =
    LazyLock::new(|| format!("WITH {HELD_ENDPOINTS} {} RETURNING job_id", jobs_from_arrays()));

/// New jobs from their arrays, then the executions of those inserted from theirs, in one
/// statement; returning the ids of the jobs inserted.
pub(super) static INSERT_JOBS_WITH_EXECUTIONS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH {HELD_ENDPOINTS},
              inserted AS ({jobs} RETURNING job_id),
              executions_inserted AS (
                  {EXECUTION_INSERT} {executions} WHERE v.job_id IN (SELECT job_id FROM inserted)
                  {EXECUTION_CONFLICT})
         SELECT * FROM inserted",
        jobs = jobs_from_arrays(),
        executions = executions_from_arrays(JOB_ARRAYS.len() + 1),
    )
});

/// Bind one array per column, in the order the statement's UNNEST reads them.
pub(super) fn push<'q, T>(args: &mut PgArguments, column: T) -> StoreResult<()>
where
    T: sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres> + 'q,
{
    args.add(column).map_err(|e| sqlx::Error::Encode(e).into())
}

pub(super) fn push_job_arrays(
    args: &mut PgArguments,
    jobs: &[(&super::super::JobWrite, Option<&super::super::ExecutionWrite>)],
) -> StoreResult<()> {
    let text = |f: fn(&super::super::JobWrite) -> Option<&str>| jobs.iter().map(|(j, _)| f(j)).collect::<Vec<_>>();
    let time = |f: fn(&super::super::JobWrite) -> Option<chrono::DateTime<chrono::Utc>>| {
        jobs.iter().map(|(j, _)| f(j)).collect::<Vec<_>>()
    };
    let int = |f: fn(&super::super::JobWrite) -> Option<i32>| jobs.iter().map(|(j, _)| f(j)).collect::<Vec<_>>();
    let json = |f: fn(&super::super::JobWrite) -> Option<&serde_json::Value>| {
        jobs.iter().map(|(j, _)| f(j).map(sqlx::types::Json)).collect::<Vec<_>>()
    };
    push(args, text(|j| Some(j.job_id.as_str())))?;
    push(args, text(|j| Some(&j.endpoint)))?;
    push(args, text(|j| Some(j.endpoint_type.as_str())))?;
    push(args, text(|j| Some(j.trigger_type.as_str())))?;
    push(args, int(|j| Some(j.version)))?;
    push(args, text(|j| j.previous_version_id.as_ref().map(|id| id.as_str())))?;
    push(args, text(|j| j.idempotency_key.as_deref()))?;
    push(args, json(|j| Some(&j.input)))?;
    push(args, time(|j| j.run_at))?;
    push(args, text(|j| j.cron_expression.as_deref()))?;
    push(args, text(|j| j.cron_timezone.as_deref()))?;
    push(args, time(|j| j.cron_starts_at))?;
    push(args, time(|j| j.cron_ends_at))?;
    push(args, time(|j| j.cron_next_run_at))?;
    push(args, time(|j| Some(j.created_at)))?;
    push(args, int(|j| Some(j.endpoint_version)))?;
    push(args, text(|j| j.trace_parent.as_deref()))?;
    push(args, time(|j| j.paused_at))?;
    push(args, text(|j| Some(j.overlap_policy.as_str())))?;
    push(args, text(|j| Some(j.catchup_policy.as_str())))?;
    push(args, int(|j| j.catchup_window_sec))?;
    push(args, int(|j| j.sla_ms))?;
    push(args, text(|j| j.on_failure.as_deref()))?;
    push(args, text(|j| j.schedule.as_ref().map(|p| p.name.as_str())))?;
    push(args, int(|j| j.schedule.as_ref().and_then(|p| p.version)))?;
    push(args, json(|j| j.schedule_spec.as_ref()))?;
    push(args, int(|j| j.cron_jitter_ms))?;
    push(args, time(|j| j.expires_at))?;
    push(args, text(|j| j.on_success.as_deref()))
}

pub(super) fn push_execution_arrays(
    args: &mut PgArguments,
    executions: &[&super::super::ExecutionWrite],
) -> StoreResult<()> {
    let column =
        |f: fn(&super::super::ExecutionWrite) -> Option<&str>| executions.iter().map(|e| f(e)).collect::<Vec<_>>();
    push(args, column(|e| Some(e.execution_id.as_str())))?;
    push(args, column(|e| Some(e.job_id.as_str())))?;
    push(args, column(|e| Some(&e.endpoint)))?;
    push(args, column(|e| Some(e.endpoint_type.as_str())))?;
    push(args, column(|e| e.idempotency_key.as_deref()))?;
    push(args, column(|e| Some(e.status.as_str())))?;
    push(args, executions.iter().map(|e| sqlx::types::Json(&e.input)).collect::<Vec<_>>())?;
    push(args, executions.iter().map(|e| e.max_attempts).collect::<Vec<_>>())?;
    push(args, executions.iter().map(|e| e.run_at).collect::<Vec<_>>())?;
    push(args, executions.iter().map(|e| e.created_at).collect::<Vec<_>>())?;
    push(args, executions.iter().map(|e| e.endpoint_version).collect::<Vec<_>>())?;
    push(args, column(|e| e.trace_parent.as_deref()))?;
    push(args, column(|e| e.retry_of.as_ref().map(|id| id.as_str())))?;
    push(args, column(|e| e.overlap_policy.map(|p| p.as_str())))?;
    push(args, executions.iter().map(|e| e.sla_ms).collect::<Vec<_>>())?;
    push(args, executions.iter().map(|e| e.expires_at).collect::<Vec<_>>())?;
    push(args, column(|e| e.on_success.as_deref()))?;
    push(args, column(|e| e.concurrency_key.as_deref()))?;
    push(args, executions.iter().map(|e| e.concurrency_limit).collect::<Vec<_>>())
}

/// Each job of the batch as written (`JobWrite::as_written`: its row is not read back), or
/// None where it was passed over; `inserted` holds the ids the INSERT returned.
pub(super) fn created_in_order(
    jobs: &[(&super::super::JobWrite, Option<&super::super::ExecutionWrite>)],
    inserted: Vec<(String,)>,
) -> Vec<Option<super::super::Job>> {
    let inserted: std::collections::HashSet<String> = inserted.into_iter().map(|(id,)| id).collect();
    jobs.iter().map(|(j, _)| inserted.contains(j.job_id.as_str()).then(|| j.as_written())).collect()
}

/// The claim (`Claims::execution_claim`): its parameters are $1 the worker, $2 now, $3 the
/// claim's size, $4 the lease in ms, $5 the shares' ceiling, $6/$7 what the worker holds of
/// each endpoint, $8/$9 the rate-limited endpoints' allowances, $10 the latest `run_at` taken
/// (`ClaimParams::due_by`).
///
/// One statement, endpoint by endpoint:
/// - `queued`: every endpoint with claimable executions ([`QUEUED_ENDPOINTS`]);
/// - `due`: those with an allowance left (this worker's shares, and the endpoint's
///   max_concurrency less what every worker runs of it now) and something due now;
/// - `taken`: from each, its earliest due executions, at most its allowance and an equal
///   part of the claim, locked with SKIP LOCKED so concurrent claimers pass over each
///   other's rows; numbered within the endpoint;
/// - the update takes them by rank (what this worker holds of the endpoint plus the
///   execution's turn within it: the endpoints held least first, round-robin among
///   equals) and finds them by primary key, from an array (see the statement; `INDEX_PLANS`
///   keeps its plan on indexes whatever the statistics).
///
/// `taken` is materialized, so it locks once; rows it locked beyond the claim's size are
/// released at commit. The lease counts from the database's clock, the reclaimer's.
pub(super) fn claim_sql() -> String {
    format!(
        "WITH RECURSIVE {QUEUED_ENDPOINTS},
         allowed AS (
             -- At most the ceiling less what this worker holds of it, and for an endpoint
             -- with max_concurrency, that less what all workers run of it now (the RUNNING
             -- rows are few: a scan of idx_executions_running).
             SELECT q.endpoint,
                    LEAST($5 - COALESCE(h.held, 0),
                          CASE WHEN ep.max_concurrency IS NULL THEN $5
                               ELSE ep.max_concurrency - (SELECT COUNT(*) FROM executions r
                                                          WHERE r.status = 'RUNNING' AND r.endpoint = q.endpoint)
                          END,
                          -- The tokens of a rate-limited endpoint's bucket.
                          COALESCE(c.cap, $5),
                          -- A half-open circuit: one probe, while none of its executions runs.
                          CASE WHEN ep.circuit_open_until IS NULL THEN $5
                               ELSE 1 - (SELECT COUNT(*) FROM executions r
                                         WHERE r.status = 'RUNNING' AND r.endpoint = q.endpoint)
                          END) AS allowance
             FROM queued q
             LEFT JOIN endpoints ep ON ep.name = q.endpoint
             LEFT JOIN UNNEST($6::text[], $7::int4[]) AS h(endpoint, held) ON h.endpoint = q.endpoint
             LEFT JOIN UNNEST($8::text[], $9::int4[]) AS c(endpoint, cap) ON c.endpoint = q.endpoint
             WHERE q.endpoint IS NOT NULL
               -- A receiver's 429 Retry-After pauses the whole endpoint.
               AND (ep.paused_until IS NULL OR ep.paused_until <= $2)
               -- An open circuit, or a disabled endpoint, is passed by.
               AND (ep.circuit_open_until IS NULL OR ep.circuit_open_until <= $2)
               AND ep.disabled_at IS NULL
               -- Nor is one its owner paused.
               AND ep.paused_at IS NULL
         ),
         due AS (
             -- The endpoint's earliest waiting execution is due: one index probe per
             -- endpoint. (Written as EXISTS, the planner, with statistics from before a
             -- burst of work, hashed every due execution of every endpoint on each claim:
             -- 27 ms of a 27 ms claim with 20,000 queued.)
             SELECT a.endpoint, a.allowance
             FROM allowed a
             WHERE a.allowance > 0
               AND (SELECT x.run_at FROM executions x
                    WHERE x.endpoint = a.endpoint AND x.status IN ('QUEUED', 'RETRYING')
                    ORDER BY x.run_at
                    LIMIT 1) <= $10
         ),
         taken AS MATERIALIZED (
             SELECT t.execution_id, t.run_at,
                    -- The claim's slots go first to the endpoints this worker holds fewest
                    -- of: an endpoint's n-th execution here ranks after whatever it holds.
                    (SELECT COALESCE(SUM(h.held), 0) FROM UNNEST($6::text[], $7::int4[]) AS h(endpoint, held)
                     WHERE h.endpoint = d.endpoint)
                      + row_number() OVER (PARTITION BY d.endpoint ORDER BY t.run_at) AS turn
             FROM due d
             CROSS JOIN LATERAL (
                 SELECT x.execution_id, x.run_at
                 FROM executions x
                 WHERE x.endpoint = d.endpoint AND x.status IN ('QUEUED', 'RETRYING') AND x.run_at <= $10
                 ORDER BY x.run_at
                 LIMIT LEAST(d.allowance, CEIL($3::float8 / (SELECT COUNT(*) FROM due))::int)
                 FOR UPDATE SKIP LOCKED
             ) AS t
         )
         -- `$2` is read before the statement runs, and the statement sees rows committed
         -- after that instant: never record a start before the execution existed. One
         -- claimed ahead of its time starts at it.
         UPDATE executions
         SET status = 'RUNNING', worker_id = $1, started_at = GREATEST($2, created_at, run_at),
             attempt_count = attempt_count + 1, claimed_at = COALESCE(claimed_at, GREATEST($2, created_at, run_at)),
             lease_expires_at = now() + $4 * INTERVAL '1 millisecond'
         -- Found by primary key, from an array: with the rows as a join, a plan made while
         -- the queue's table held a few rows scanned all of it once per row taken.
         -- Every unfinished status, not the two taken: it confines the update to the
         -- queue's partition without naming a partial index's condition, whose index a
         -- plan for a near-empty table would read whole instead.
         WHERE execution_id = ANY(ARRAY(SELECT execution_id FROM taken ORDER BY turn, run_at LIMIT $3))
           AND status IN ('PENDING', 'QUEUED', 'RUNNING', 'RETRYING')
         RETURNING {EXECUTION_COLUMNS}"
    )
}
