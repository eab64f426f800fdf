//! The upkeep of the history's partitions: made ahead of time, analyzed once their span has
//! ended, emptied and dropped once wholly older than the retention, and the one-shot jobs of
//! a dropped span deleted with it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::{children, list, literal, lock_timed_out, run, to_drop, to_make, Partition, BY_TIME, LOCK_TIMEOUT};
use crate::store::{HistoryUpkept, StoreResult};

/// Make every table's partitions up to the `horizon` past `now`; `ANALYZE` each partition
/// once its span has ended (the planner's figures for it, and the count of its rows when it
/// is dropped); drop those wholly older than `cutoff` (None: keep everything). Any number of
/// schedulers may do this at once: the makers take turns on a lock of the parent, and a
/// partition another dropped first is gone.
///
/// Partitions are made first, for every table, and the jobs of expired partitions are then
/// deleted for at most `budget`: a round that deleted jobs for longer than the partitions
/// ahead last (a 30 s span of 360,000 executions took minutes) made its spans late, over
/// times rows had already been written for into the DEFAULT partition, which no partition
/// can then take and the purge must delete row by row.
pub async fn upkeep(
    pool: &PgPool,
    now: DateTime<Utc>,
    window: Duration,
    cutoff: Option<DateTime<Utc>>,
    budget: Duration,
) -> StoreResult<HistoryUpkept> {
    let mut upkept = HistoryUpkept::default();
    for (table, _) in BY_TIME {
        upkept.made.extend(make_ahead(pool, table, now, window).await?);
    }
    for (table, _) in BY_TIME {
        analyze_ended(pool, table, now).await?;
    }
    let Some(cutoff) = cutoff else { return Ok(upkept) };
    let deadline = Instant::now() + budget;
    for (table, _) in BY_TIME {
        let expired = to_drop(&list(pool, table).await?, cutoff);
        let mut emptied = Vec::new();
        for partition in expired {
            if table == "executions_done" {
                let (purged, done) = purge_jobs_of(pool, &partition, deadline).await?;
                upkept.jobs_purged += purged;
                if !done {
                    // Its executions stay until its jobs are gone (the next rounds go on
                    // from here), so that no job is left without an execution to find it by;
                    // its attempts and log lines stay with them.
                    upkept.behind = true;
                    return Ok(upkept);
                }
            }
            if let Some(rows) = empty_partition(pool, &partition.name).await? {
                if table == "executions_done" {
                    upkept.executions_dropped += rows;
                }
                emptied.push(partition.name);
            }
        }
        if drop_partitions(pool, &emptied).await? {
            upkept.dropped.extend(emptied);
        }
    }
    Ok(upkept)
}

/// `ANALYZE` the partitions of `table` whose span has ended and that were never analyzed:
/// rows no longer arrive in them (but for a late finish), and nothing else would analyze a
/// table that is only ever inserted into where autovacuum is off.
async fn analyze_ended(pool: &PgPool, table: &str, now: DateTime<Utc>) -> StoreResult<()> {
    let unanalyzed: Vec<(String,)> = sqlx::query_as(
        "SELECT c.relname::text FROM pg_inherits i
         JOIN pg_class c ON c.oid = i.inhrelid
         JOIN pg_stat_user_tables s ON s.relid = i.inhrelid
         WHERE i.inhparent = to_regclass($1) AND s.last_analyze IS NULL AND s.last_autoanalyze IS NULL",
    )
    .bind(table)
    .fetch_all(pool)
    .await?;
    for (name,) in unanalyzed {
        if Partition::parse(table, &name).is_some_and(|p| p.to <= now) {
            // A tenth of the default sample (3,000 rows): a partition's rows are alike, and
            // the planner needs its size and rough distributions, not fine histograms.
            let mut tx = pool.begin().await?;
            run(&mut tx, &format!("SET LOCAL default_statistics_target = 10; ANALYZE {name}")).await?;
            tx.commit().await?;
        }
    }
    Ok(())
}

async fn make_ahead(pool: &PgPool, table: &str, now: DateTime<Utc>, window: Duration) -> StoreResult<Vec<String>> {
    let mut made = Vec::new();
    if to_make(table, &list(pool, table).await?, now, window).is_empty() {
        return Ok(made);
    }
    // The lock an attach takes on the parent: writes go on (only the DEFAULT partition is
    // locked exclusively, to check that none of its rows falls in the new span), and makers
    // take turns.
    let mut tx = pool.begin().await?;
    run(
        &mut tx,
        &format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'; LOCK TABLE ONLY {table} IN SHARE UPDATE EXCLUSIVE MODE"),
    )
    .await?;
    // Asked again under the lock: another scheduler may have made them meanwhile.
    let existing: Vec<Partition> =
        children(&mut tx, table).await?.iter().filter_map(|name| Partition::parse(table, name)).collect();
    for partition in to_make(table, &existing, now, window) {
        // A savepoint each: a partition over rows already in the DEFAULT partition is refused
        // (23514), and the ones after it may still be made.
        run(&mut tx, "SAVEPOINT make").await?;
        match attach_new(&mut tx, table, &partition).await {
            Ok(()) => made.push(partition.name),
            Err(error) => {
                run(&mut tx, "ROLLBACK TO SAVEPOINT make").await?;
                tracing::info!(partition = %partition.name, error = %crate::error_chain::describe(&error),
                    "Could not make the partition; the rows of its time stay in the DEFAULT partition.");
            }
        }
    }
    tx.commit().await?;
    Ok(made)
}

/// A new partition: made as a table of its own, then attached, which locks the parent less
/// than `CREATE TABLE … PARTITION OF` (SHARE UPDATE EXCLUSIVE: reads and writes go on); the
/// parent's indexes are built on it as it is attached (instantly: it is empty).
async fn attach_new(tx: &mut PgConnection, table: &str, partition: &Partition) -> Result<(), sqlx::Error> {
    let from = partition.from.map_or_else(|| "MINVALUE".to_owned(), |t| format!("'{}'", literal(t)));
    run(
        &mut *tx,
        &format!(
            "CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
         ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ({from}) TO ('{to}')",
            name = partition.name,
            to = literal(partition.to),
        ),
    )
    .await?;
    Ok(())
}

/// Empty one partition wholly past the retention: its rows as last counted (`ANALYZE`; 0 if
/// never, or already emptied), or None when its lock did not come within
/// [`SHORT_LOCK_TIMEOUT`] (tried again next round). `TRUNCATE` locks the partition alone, but
/// while it waits for the reads of it in flight it holds back every statement that locks the
/// partition after it — and not only reads of old history: a statement on `executions` that
/// its conditions do not confine to newer partitions locks them all (the insert's search for
/// a finished execution with the same idempotency key does). Behind a history read of
/// seconds it waited its second, three partitions in a row, and a cron tick was up to 951 ms
/// late in that window of the soak; so it waits briefly and leaves the partition to the next
/// round instead.
async fn empty_partition(pool: &PgPool, name: &str) -> StoreResult<Option<i64>> {
    let mut tx = pool.begin().await?;
    run(&mut tx, &format!("SET LOCAL lock_timeout = '{SHORT_LOCK_TIMEOUT}'")).await?;
    let rows: Option<(f32,)> = sqlx::query_as("SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)")
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
    let Some((rows,)) = rows else { return Ok(None) };
    match run(&mut tx, &format!("TRUNCATE {name}")).await {
        Ok(()) => {
            tx.commit().await?;
            Ok(Some(rows.max(0.0).round() as i64))
        }
        Err(error) if lock_timed_out(&error) => {
            tracing::info!(partition = %name, "Emptying the partition waited too long for its lock; trying again next round.");
            Ok(None)
        }
        Err(error) => Err(error.into()),
    }
}

/// Jobs deleted by one statement of [`purge_jobs_of`]: short, since a statement running holds
/// back the vacuum of the queue's partition (5,000 took a quarter of a second in the soak).
const JOBS_PER_DELETE: i64 = 1_000;

/// The delete of [`purge_jobs_of`]: $1 the chunk's job ids, $2 and $3 the span's bounds (a
/// null $2 for a span from the beginning of time: unbounded). By primary key from an array,
/// so that no plan can join the chunk to `jobs` otherwise: joined to the chunk as a table,
/// with statistics from when `jobs` was small, the planner read all of `jobs` once and
/// compared every row with every job of the chunk (50 s a statement in the short soak, while
/// no vacuum could remove a dead row). The span as a range, which no index of `jobs`
/// answers: as two comparisons, the planner read idx_jobs_created from its start instead.
pub(in crate::store) const JOBS_DELETE: &str = "DELETE FROM jobs j
     WHERE j.job_id = ANY($1::text[])
       AND tstzrange($2, $3) @> j.created_at
       AND j.trigger_type <> 'CRON'
       AND NOT EXISTS (SELECT 1 FROM executions r WHERE r.job_id = j.job_id AND r.retry_of IS NOT NULL)";

/// Delete the one-shot jobs whose first execution is in `partition` (an expired span of
/// `executions_done`, about to be emptied) and that have no retry, in statements of
/// [`JOBS_PER_DELETE`]; how many. A one-shot job's first execution is made with it, at the same
/// instant, and any later one retries an earlier (`retry_of`): a job of the span's executions
/// made within the span, with no retry, has no execution elsewhere. A job costs a probe of
/// its primary key and one of the few retries' index per partition, where the purge's
/// row-by-row search for jobs with no execution left probes every partition for each. What
/// this leaves (retried jobs, retired cron versions, jobs whose first execution was in the
/// DEFAULT partition) the purge deletes row by row.
async fn purge_jobs_of(pool: &PgPool, partition: &Partition, deadline: Instant) -> StoreResult<(i64, bool)> {
    // The partition's executions a chunk at a time, in job id order from its index (a plan that
    // read the partition whole and sorted it for each chunk made the purge quadratic), and
    // their jobs deleted by primary key.
    // (`status <> 'RUNNING'`, true of every finished execution, is the condition of the index
    // that holds them in job order, idx_executions_settled_by_job.) Each job once: a cron
    // job has an execution a second in every span, and a chunk of one job's thousand
    // executions deletes nothing.
    let next = format!(
        "SELECT DISTINCT job_id FROM {} WHERE job_id > $1 AND status <> 'RUNNING' ORDER BY job_id LIMIT {JOBS_PER_DELETE}",
        partition.name
    );
    let mut after = resume_point(&partition.name);
    let mut purged = 0;
    loop {
        let mut tx = pool.begin().await?;
        run(&mut tx, JOBS_PURGE_PLANS).await?;
        let ids: Vec<String> = sqlx::query_scalar(&next).bind(&after).persistent(false).fetch_all(&mut *tx).await?;
        let Some(last) = ids.last() else { return Ok((purged, true)) };
        after = last.clone();
        let deleted = sqlx::query(JOBS_DELETE)
            .bind(&ids)
            .bind(partition.from)
            .bind(partition.to)
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        purged += deleted.rows_affected() as i64;
        // At least one statement a round, so that every round gets on.
        if Instant::now() >= deadline {
            *JOBS_PURGED_TO.lock().unwrap_or_else(|e| e.into_inner()) = Some((partition.name.clone(), after));
            return Ok((purged, false));
        }
    }
}

/// The plan of [`purge_jobs_of`]'s statements: index reads. (When the delete still joined the
/// chunk as a table, the planner joined it to `jobs` by a merge join that read `pk_jobs` from
/// its first entry: 1.9 million rows, 1.3 s a chunk, and 0.4 s more compiling it, its cost
/// estimate having set off JIT, where the probes take 11 ms; the soak at 5d567fe.)
pub(in crate::store) const JOBS_PURGE_PLANS: &str = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
     SET LOCAL enable_mergejoin = off; SET LOCAL enable_hashjoin = off; SET LOCAL jit = off";

/// Where the last round's [`purge_jobs_of`] stopped at its deadline: the partition, and the
/// last job id it deleted up to. Only a shortcut: another process may have gone further, and
/// without it a round starts from the partition's first job again, finding those deleted.
static JOBS_PURGED_TO: Mutex<Option<(String, String)>> = Mutex::new(None);

/// Where to start deleting the jobs of `partition`: where this process left off, if it was there.
fn resume_point(partition: &str) -> String {
    let mut purged_to = JOBS_PURGED_TO.lock().unwrap_or_else(|e| e.into_inner());
    match purged_to.take() {
        Some((name, after)) if name == partition => after,
        _ => String::new(),
    }
}

/// How long emptying an expired partition or dropping emptied ones may wait for its lock.
/// Dropping a partition locks its parent exclusively: every write to the table waits for it
/// (and, while it waits, for the statements before it); emptying one holds back what locks
/// the partition ([`empty_partition`]). So each waits little and is tried again each round;
/// an expired partition costs only its disk meanwhile.
const SHORT_LOCK_TIMEOUT: &str = "20ms";

/// Drop `names` (emptied partitions of one table) in one transaction; whether they went.
async fn drop_partitions(pool: &PgPool, names: &[String]) -> StoreResult<bool> {
    if names.is_empty() {
        return Ok(false);
    }
    let mut tx = pool.begin().await?;
    let dropped = run(
        &mut tx,
        &format!("SET LOCAL lock_timeout = '{SHORT_LOCK_TIMEOUT}'; DROP TABLE IF EXISTS {}", names.join(", ")),
    )
    .await;
    match dropped {
        Ok(()) => {
            tx.commit().await?;
            Ok(true)
        }
        Err(error) if lock_timed_out(&error) => {
            tracing::debug!(partitions = ?names, "Dropping emptied partitions waited too long for the lock; trying again next round.");
            Ok(false)
        }
        Err(error) => Err(error.into()),
    }
}
