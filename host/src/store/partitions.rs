//! PostgreSQL keeps the queue apart from its history, and history in time partitions that
//! retention drops whole. (CockroachDB and SQLite keep one table each and delete by row.)
//!
//! # Layout
//!
//! - `executions` is partitioned by LIST (status). `executions_live` holds what is still to be
//!   delivered (PENDING, QUEUED, RUNNING, RETRYING): it is as large as the queue, whatever the
//!   history. `executions_done` holds finished executions (SUCCESS, FAILED, CANCELLED),
//!   partitioned by RANGE (created_at). The write that finishes an execution moves its row
//!   from one to the other (PostgreSQL does so for an UPDATE of the partition key).
//! - `attempts` is partitioned by RANGE (created_at), `execution_logs` by RANGE (logged_at).
//! - Each table partitioned by time has partitions `{table}_p{from}_{to}` (times in UTC,
//!   `YYYYMMDDtHHMMSS`), made ahead by the scheduler ([`upkeep`]); a DEFAULT partition
//!   `{table}_default` for rows outside them (made before the first partition, by a clock far
//!   off, or finishing after their partition was dropped); and, on a database converted with
//!   history in it, the old table as `{table}_pmin_{to}`: everything made before the
//!   conversion.
//!
//! # Why
//!
//! In one table, every finished execution stays beside the queue. Each claim and result
//! leaves a dead row version in it, and each purge deletes rows: the vacuum that removes them
//! reads every index of the whole table each time, so its cost grows with the history. The
//! soak (docs/benchmarks.md, "Soak") measured it: with a five-minute retention at ~6,000
//! deliveries a second the purge fell behind, PostgreSQL's CPU per delivery doubled while it
//! ran and the delivery rate halved. Split so, the claim, the result write and their vacuums
//! touch a table the size of the queue; finished rows are written once into the newest
//! partitions and never changed again (but for a failure's notification mark); retention is a
//! `DROP TABLE` of a partition wholly older than `TE_RETENTION`, with no dead rows, no vacuum
//! and no WAL per row. Rows in the DEFAULT and `pmin` partitions are deleted row by row, as
//! everywhere before.
//!
//! # What it costs
//!
//! - A read by id alone (no status, no time) looks into every partition's index: fine for
//!   the API's reads, so the hot statements name the status they expect (`status =
//!   'RUNNING'`), which confines them to `executions_live`.
//! - Uniqueness across partitions cannot be declared, so the one unique key on executions
//!   (a job's idempotency key: a cron tick, a retry) is unique in `executions_live`, and
//!   inserts first look for the key among the finished (`NOT EXISTS`).
//! - A statement that locks a RUNNING row another transaction has just finished (moved to
//!   `executions_done`) fails with a serialization error (SQLSTATE 40001) instead of finding
//!   the row gone; callers treat it as transient, and the routine lease renewal passes over
//!   rows being finished (`SKIP LOCKED`).
//! - Dropping a partition takes an exclusive lock on its parent for an instant: it waits for
//!   the statements in flight and holds the next ones meanwhile (bounded by a lock timeout;
//!   a drop that times out is tried again at the next round).
//! - An attempt or log line older than `TE_RETENTION` goes with its partition even when its
//!   execution is still unfinished (retried for longer than the retention).

use std::time::Duration;

use chrono::{DateTime, DurationRound, NaiveDateTime, TimeZone, Utc};
use sqlx::{PgConnection, PgPool};

use super::{HistoryUpkept, StoreResult};

/// Statuses of `executions_live`; the others are finished, in `executions_done`.
const LIVE_STATUSES: &str = "'PENDING', 'QUEUED', 'RUNNING', 'RETRYING'";
const DONE_STATUSES: &str = "'SUCCESS', 'FAILED', 'CANCELLED'";

/// How a partition's bounds are written in its name.
const NAME_TIME: &str = "%Y%m%dt%H%M%S";

/// The tables partitioned by time: the table, the column it is partitioned by.
pub const BY_TIME: [(&str, &str); 3] =
    [("executions_done", "created_at"), ("attempts", "created_at"), ("execution_logs", "logged_at")];

/// The shortest and longest time a partition spans.
const SHORTEST: Duration = Duration::from_secs(10);
const LONGEST: Duration = Duration::from_secs(24 * 3600);
/// What a partition spans when nothing is ever purged: history still ages into tables that are
/// written no more, and a read by id looks into about fifty partitions a year.
const WITHOUT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// How far ahead of now partitions are made: the span now is in, and the next, and at
/// least twice the span (up to an hour) beyond now, so a scheduler stopped for a while (or a
/// process whose clock runs ahead) still finds partitions.
fn horizon(now: DateTime<Utc>, window: Duration) -> DateTime<Utc> {
    let step = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::days(1));
    now + step + std::cmp::min(step * 2, chrono::Duration::hours(1))
}
/// The longest a drop or an attach waits for the locks it needs before giving up for a round.
const LOCK_TIMEOUT: &str = "1s";

/// The span of a new partition: a tenth of the retention, so that a finished execution is
/// deleted at most a tenth of `TE_RETENTION` after it is due to be (and about a dozen
/// partitions hold the history), within [`SHORTEST`] and [`LONGEST`]; [`WITHOUT_RETENTION`]
/// when there is none.
pub fn window(retention: Duration) -> Duration {
    if retention.is_zero() {
        return WITHOUT_RETENTION;
    }
    (retention / 10).clamp(SHORTEST, LONGEST)
}

/// One partition of a table partitioned by time, as its name says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    /// None: from the beginning of time (a converted table's history).
    pub from: Option<DateTime<Utc>>,
    pub to: DateTime<Utc>,
}

impl Partition {
    fn new(table: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        let name = format!("{table}_p{}_{}", from.format(NAME_TIME), to.format(NAME_TIME));
        Self { name, from: Some(from), to }
    }

    /// The partition a child of `table` named `name` is, or None (the DEFAULT partition, or a
    /// table not made here).
    pub fn parse(table: &str, name: &str) -> Option<Self> {
        let bounds = name.strip_prefix(table)?.strip_prefix("_p")?;
        let (from, to) = bounds.split_once('_')?;
        let time = |text: &str| NaiveDateTime::parse_from_str(text, NAME_TIME).ok().map(|t| Utc.from_utc_datetime(&t));
        let from = if from == "min" { None } else { Some(time(from)?) };
        Some(Self { name: name.to_owned(), from, to: time(to)? })
    }
}

/// `t` rounded down to a multiple of `window` since the epoch.
fn align_down(t: DateTime<Utc>, window: Duration) -> DateTime<Utc> {
    let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::days(1));
    t.duration_trunc(window).unwrap_or(t)
}

/// How far past now a new partition starts, at the least. A partition is attached while
/// writes go on (their lock does not conflict with the attach's), so one made over a time rows
/// are being written for would race them: a row routed to the DEFAULT partition by the list
/// of partitions before it, and written there after it, is refused (23514). Rows are stamped
/// with their process's clock, so this is also the clock skew between processes that never
/// meets a partition being made.
const LEAD: chrono::Duration = chrono::Duration::seconds(10);

/// The partitions to make so that `existing` reach the [`horizon`] past `now`: from where
/// the newest ends, or (with none, or none reaching [`LEAD`] past now) from the first
/// boundary past that lead — the times before it are the DEFAULT partition's — each ending
/// on a multiple of `window`.
pub fn to_make(table: &str, existing: &[Partition], now: DateTime<Utc>, window: Duration) -> Vec<Partition> {
    let step = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::days(1));
    let horizon = horizon(now, window);
    let newest = existing.iter().map(|p| p.to).max();
    let mut from = match newest {
        Some(to) if to >= now + LEAD => to,
        _ => align_down(now + LEAD, window) + step,
    };
    let mut made = Vec::new();
    while from < horizon {
        let mut to = align_down(from, window) + step;
        // A partition much shorter than a window (after the window changed) joins the next.
        if to - from < step / 2 {
            to += step;
        }
        made.push(Partition::new(table, from, to));
        from = to;
    }
    made
}

/// The partitions wholly older than `cutoff`: every row in them may go.
pub fn to_drop(existing: &[Partition], cutoff: DateTime<Utc>) -> Vec<Partition> {
    existing.iter().filter(|p| p.to <= cutoff).cloned().collect()
}

/// Whether `executions` is already partitioned.
pub async fn is_partitioned(pool: &PgPool) -> StoreResult<bool> {
    let (partitioned,): (bool,) = sqlx::query_as(
        "SELECT COALESCE((SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass('executions')), false)",
    )
    .fetch_one(pool)
    .await?;
    Ok(partitioned)
}

/// The children of `table` made here, by their names.
pub async fn list(pool: &PgPool, table: &str) -> StoreResult<Vec<Partition>> {
    let children = children(&mut *pool.acquire().await?, table).await?;
    Ok(children.iter().filter_map(|name| Partition::parse(table, name)).collect())
}

async fn children(connection: &mut sqlx::PgConnection, table: &str) -> StoreResult<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = to_regclass($1) ORDER BY c.relname",
    )
    .bind(table)
    .fetch_all(connection)
    .await?;
    Ok(rows.into_iter().map(|(name,)| name).collect())
}

/// The partitions of `executions_done` whose rows the purge deletes one by one: the DEFAULT
/// partition and a converted table's history (`pmin`), which no drop takes whole before its
/// end is past the retention.
pub async fn deleted_by_row(pool: &PgPool, table: &str) -> StoreResult<Vec<String>> {
    let children = children(&mut *pool.acquire().await?, table).await?;
    Ok(children
        .into_iter()
        .filter(|name| {
            *name == format!("{table}_default") || Partition::parse(table, name).is_some_and(|p| p.from.is_none())
        })
        .collect())
}

/// Make every table's partitions up to the [`horizon`] past `now`; `ANALYZE` each partition
/// once its span has ended (the planner's figures for it, and the count of its rows when it
/// is dropped); drop those wholly older than `cutoff` (None: keep everything). Any number of
/// schedulers may do this at once: the makers take turns on a lock of the parent, and a
/// partition another dropped first is gone.
pub async fn upkeep(
    pool: &PgPool,
    now: DateTime<Utc>,
    window: Duration,
    cutoff: Option<DateTime<Utc>>,
) -> StoreResult<HistoryUpkept> {
    let mut upkept = HistoryUpkept::default();
    for (table, _) in BY_TIME {
        upkept.made.extend(make_ahead(pool, table, now, window).await?);
        analyze_ended(pool, table, now).await?;
        let Some(cutoff) = cutoff else { continue };
        let expired = to_drop(&list(pool, table).await?, cutoff);
        let mut emptied = Vec::new();
        for partition in expired {
            if table == "executions_done" {
                upkept.jobs_purged += purge_jobs_of(pool, &partition.name).await?;
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

/// Run `sql`, one statement or several (the simple query protocol: nothing is prepared).
/// (Through `sqlx::raw_sql`, a reborrowed connection inside the store's `async_trait` methods
/// made rustc find the executor "not general enough" to be `Send`.)
async fn run(connection: &mut PgConnection, sql: &str) -> Result<(), sqlx::Error> {
    sqlx::Executor::execute(connection, sql).await?;
    Ok(())
}

/// A time as a literal PostgreSQL reads the same whatever the session's time zone.
fn literal(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string()
}

/// Empty one partition wholly past the retention: its rows as last counted (`ANALYZE`; 0 if
/// never, or already emptied), or None when its lock did not come within [`LOCK_TIMEOUT`]
/// (tried again next round). `TRUNCATE` locks the partition alone: it waits for the reads of
/// it in flight and holds the next ones meanwhile, but no write ever comes to it (its time is
/// past), so deliveries go on.
async fn empty_partition(pool: &PgPool, name: &str) -> StoreResult<Option<i64>> {
    let mut tx = pool.begin().await?;
    run(&mut tx, &format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")).await?;
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

/// Delete the one-shot jobs whose first execution is in `partition` (an expired span of
/// `executions_done`, about to be emptied) and that have no retry, in statements of
/// [`JOBS_PER_DELETE`]; how many. A one-shot job's first execution is made with it, at the same
/// instant, and any later one retries an earlier (`retry_of`): joined by that instant, and the
/// few retries read once per statement, a job costs one probe of its primary key, where the
/// purge's row-by-row search for jobs with no execution left probes every partition for each.
/// What this leaves (retried jobs, retired cron versions, jobs whose first execution was in
/// the DEFAULT partition) the purge deletes row by row.
async fn purge_jobs_of(pool: &PgPool, partition: &str) -> StoreResult<i64> {
    // The partition's executions a chunk at a time, in job id order from its index (a plan that
    // read the partition whole and sorted it for each chunk made the purge quadratic), and
    // their jobs deleted by primary key.
    // (`status <> 'RUNNING'`, true of every finished execution, is the condition of the index
    // that holds them in job order, idx_executions_settled_by_job.)
    let next = format!(
        "SELECT job_id, created_at FROM {partition} WHERE job_id > $1 AND status <> 'RUNNING'
         ORDER BY job_id LIMIT {JOBS_PER_DELETE}"
    );
    let delete = "DELETE FROM jobs j
         USING UNNEST($1::text[], $2::timestamptz[]) AS first(job_id, created_at)
         WHERE j.job_id = first.job_id AND j.created_at = first.created_at
           AND j.trigger_type <> 'CRON'
           AND j.job_id NOT IN (SELECT r.job_id FROM executions r WHERE r.retry_of IS NOT NULL)";
    let (mut after, mut purged) = (String::new(), 0);
    loop {
        let mut tx = pool.begin().await?;
        run(&mut tx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off").await?;
        let chunk: Vec<(String, DateTime<Utc>)> =
            sqlx::query_as(&next).bind(&after).persistent(false).fetch_all(&mut *tx).await?;
        let Some((last, _)) = chunk.last() else { return Ok(purged) };
        after = last.clone();
        let (ids, times): (Vec<String>, Vec<DateTime<Utc>>) = chunk.into_iter().unzip();
        let deleted = sqlx::query(delete).bind(&ids).bind(&times).persistent(false).execute(&mut *tx).await?;
        tx.commit().await?;
        purged += deleted.rows_affected() as i64;
    }
}

/// How long a drop of emptied partitions may wait for its lock. Dropping a partition locks its
/// parent exclusively: every write to the table waits for it (and, while it waits, for
/// the statements before it), so it waits little and is tried again each round; emptied
/// partitions cost nothing meanwhile.
const DROP_LOCK_TIMEOUT: &str = "20ms";

/// Drop `names` (emptied partitions of one table) in one transaction; whether they went.
async fn drop_partitions(pool: &PgPool, names: &[String]) -> StoreResult<bool> {
    if names.is_empty() {
        return Ok(false);
    }
    let mut tx = pool.begin().await?;
    let dropped = run(
        &mut tx,
        &format!("SET LOCAL lock_timeout = '{DROP_LOCK_TIMEOUT}'; DROP TABLE IF EXISTS {}", names.join(", ")),
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

/// SQLSTATE 55P03, lock_not_available: `lock_timeout` passed.
fn lock_timed_out(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

/// An index as `pg_get_indexdef` writes it, with what the conversion needs to know of it.
#[derive(Debug, Clone)]
struct IndexDef {
    name: String,
    definition: String,
    primary: bool,
    unique: bool,
    /// The constraint it backs (a primary key or UNIQUE constraint), renamed with it.
    constraint: Option<String>,
}

async fn index_defs(tx: &mut PgConnection, table: &str) -> StoreResult<Vec<IndexDef>> {
    let rows: Vec<(String, String, bool, bool, Option<String>)> = sqlx::query_as(
        "SELECT c.relname::text, pg_get_indexdef(i.indexrelid), i.indisprimary, i.indisunique, con.conname::text
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
         WHERE i.indrelid = to_regclass($1)
         ORDER BY c.relname",
    )
    .bind(table)
    .fetch_all(&mut *tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(name, definition, primary, unique, constraint)| IndexDef {
            name,
            definition,
            primary,
            unique,
            constraint,
        })
        .collect())
}

impl IndexDef {
    /// This index's definition as a plain (not unique) index named `name` on `table`.
    fn on(&self, table: &str, name: &str, unique: bool) -> Option<String> {
        // "CREATE [UNIQUE] INDEX name ON [ONLY] schema.table USING method (…) [WHERE …]"
        let using = self.definition.find(" USING ")?;
        let rest = &self.definition[using..];
        let unique = if unique { "UNIQUE " } else { "" };
        Some(format!("CREATE {unique}INDEX {name} ON {table}{rest}"))
    }

    /// The statuses its condition confines it to (`status = 'X'`, or `status = ANY (…)`), or
    /// None when it names none, or excludes some (`<>`).
    fn statuses(&self) -> Option<Vec<String>> {
        let predicate = &self.definition[self.definition.find(" WHERE ")?..];
        if predicate.contains("<>") || !predicate.contains("status = ") {
            return None;
        }
        let named: Vec<String> = predicate
            .split('\'')
            .skip(1)
            .step_by(2)
            .filter(|word| word.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(str::to_owned)
            .collect();
        (!named.is_empty()).then_some(named)
    }

    /// The key and predicate: what makes two indexes the same index.
    fn shape(&self) -> Option<&str> {
        self.definition.find(" USING ").map(|at| &self.definition[at..])
    }
}

/// Make the layout this module describes from the plain tables the migrations create, in one
/// transaction; a table already partitioned is left as it is. Existing rows stay: the queue
/// moves to `executions_live`, and each table's history becomes its `pmin` partition
/// (attaching it reads it once, and builds the primary key the partitioned table needs).
pub async fn convert(pool: &PgPool) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    let (partitioned,): (bool,) =
        sqlx::query_as("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass('executions')")
            .fetch_one(&mut *tx)
            .await?;
    if !partitioned {
        tracing::info!(
            "Partitioning the executions, attempts and log lines (queue apart from history, history by time)."
        );
        convert_executions(&mut tx).await?;
    }
    for (table, column) in [("attempts", "created_at"), ("execution_logs", "logged_at")] {
        let (partitioned,): (bool,) = sqlx::query_as("SELECT relkind = 'p' FROM pg_class WHERE oid = to_regclass($1)")
            .bind(table)
            .fetch_one(&mut *tx)
            .await?;
        if !partitioned {
            convert_by_time(&mut tx, table, column).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Rename `table` and its indexes and constraints out of the way (`{name}_unpartitioned`),
/// and make the partitioned table under its name with the same columns, defaults and checks;
/// the old table's indexes, as they were.
async fn set_aside(tx: &mut PgConnection, table: &str, partition_by: &str) -> StoreResult<Vec<IndexDef>> {
    let indexes = index_defs(tx, table).await?;
    let old = format!("{table}_unpartitioned");
    let mut renames = vec![format!("ALTER TABLE {table} RENAME TO {old}")];
    for index in &indexes {
        renames.push(match &index.constraint {
            Some(constraint) => {
                format!("ALTER TABLE {old} RENAME CONSTRAINT {constraint} TO {constraint}_unpartitioned")
            }
            None => format!("ALTER INDEX {} RENAME TO {}_unpartitioned", index.name, index.name),
        });
    }
    renames.push(format!(
        "CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY {partition_by}"
    ));
    run(&mut *tx, &renames.join(";\n")).await?;
    Ok(indexes)
}

/// Every index but the primary key, on the partitioned `table` (so on every partition, present
/// and future), none unique: a unique index there would have to include the partition key. An
/// index of the same shape as one already made is left out.
async fn index_tree(tx: &mut PgConnection, table: &str, indexes: &[IndexDef]) -> StoreResult<()> {
    let mut shapes: Vec<&str> = Vec::new();
    let mut statements = Vec::new();
    for index in indexes.iter().filter(|i| !i.primary) {
        let (Some(shape), Some(definition)) = (index.shape(), index.on(table, &index.name, false)) else { continue };
        if shapes.contains(&shape) {
            continue;
        }
        shapes.push(shape);
        statements.push(definition);
    }
    if !statements.is_empty() {
        run(&mut *tx, &statements.join(";\n")).await?;
    }
    Ok(())
}

/// The old table's rows, if any, as the partition `{tree}_pmin_{to}` of `tree`, where `to` is a
/// whole second past both now and its newest row (None: it was empty, and is dropped).
async fn attach_history(
    tx: &mut PgConnection,
    old: &str,
    tree: &str,
    column: &str,
    superseded: Vec<IndexDef>,
) -> StoreResult<Option<String>> {
    let (newest,): (Option<DateTime<Utc>>,) =
        sqlx::query_as(&format!("SELECT max({column}) FROM {old}")).fetch_one(&mut *tx).await?;
    let Some(newest) = newest else {
        run(&mut *tx, &format!("DROP TABLE {old}")).await?;
        return Ok(None);
    };
    let to = align_down(newest.max(Utc::now()), Duration::from_secs(1)) + chrono::Duration::seconds(1);
    let name = format!("{tree}_pmin_{}", to.format(NAME_TIME));
    let mut statements = vec![format!("ALTER TABLE {old} RENAME TO {name}")];
    // The old keys are replaced by the partitioned table's own, which attaching builds on it (a
    // primary key with the partition key, plain indexes for unique ones; a table can have one
    // primary key, so the old one goes first).
    for index in &superseded {
        statements.push(match &index.constraint {
            Some(constraint) => format!("ALTER TABLE {name} DROP CONSTRAINT {constraint}_unpartitioned"),
            None => format!("DROP INDEX {}_unpartitioned", index.name),
        });
    }
    statements
        .push(format!("ALTER TABLE {tree} ATTACH PARTITION {name} FOR VALUES FROM (MINVALUE) TO ('{}')", literal(to)));
    run(&mut *tx, &statements.join(";\n")).await?;
    tracing::info!(partition = %name, "The history made before partitioning is now one partition, purged by row.");
    Ok(Some(name))
}

async fn convert_executions(tx: &mut PgConnection) -> StoreResult<()> {
    let indexes = set_aside(tx, "executions", "LIST (status)").await?;
    let primary = indexes.iter().find(|i| i.primary);
    let key = primary.and_then(|p| p.shape()).unwrap_or(" USING btree (execution_id)");
    let key_columns = key.trim_start_matches(" USING btree ");
    let done_key = format!("{}, created_at)", key_columns.trim_end_matches(')'));
    let mut statements = vec![
        format!("CREATE TABLE executions_live PARTITION OF executions FOR VALUES IN ({LIVE_STATUSES})"),
        format!("ALTER TABLE executions_live ADD CONSTRAINT pk_executions_live PRIMARY KEY {key_columns}"),
        format!(
            "CREATE TABLE executions_done PARTITION OF executions FOR VALUES IN ({DONE_STATUSES}) PARTITION BY RANGE (created_at)"
        ),
        format!("ALTER TABLE executions_done ADD CONSTRAINT pk_executions_done PRIMARY KEY {done_key}"),
        "CREATE TABLE executions_done_default PARTITION OF executions_done DEFAULT".to_owned(),
    ];
    // A unique key stays unique where the queue is; among the finished, inserts look first.
    for index in indexes.iter().filter(|i| i.unique && !i.primary) {
        statements.extend(index.on("executions_live", &format!("{}_live", index.name), true));
    }
    run(&mut *tx, &statements.join(";\n")).await?;
    // Each index where its rows can be: one whose condition names only unfinished statuses on
    // the queue's partition, only finished ones on the history's, the rest on both. Every
    // index the queue's partition carries is written on each claim and result and read whole by
    // each of its vacuums, every few seconds.
    let (mut live, mut done, mut both) = (Vec::new(), Vec::new(), Vec::new());
    for index in indexes.iter().filter(|i| !i.primary) {
        match (index.unique, index.statuses()) {
            // The unique key: unique on the queue's partition (above), plain among the finished.
            (true, _) => done.push(index.clone()),
            (false, Some(named)) if named.iter().all(|s| LIVE_STATUSES.contains(&format!("'{s}'"))) => {
                live.push(index.clone())
            }
            (false, Some(named)) if named.iter().all(|s| DONE_STATUSES.contains(&format!("'{s}'"))) => {
                done.push(index.clone())
            }
            _ => both.push(index.clone()),
        }
    }
    index_tree(tx, "executions", &both).await?;
    index_tree(tx, "executions_live", &live).await?;
    index_tree(tx, "executions_done", &done).await?;
    run(
        &mut *tx,
        &format!(
            "INSERT INTO executions_live SELECT * FROM executions_unpartitioned WHERE status IN ({LIVE_STATUSES});
         DELETE FROM executions_unpartitioned WHERE status IN ({LIVE_STATUSES})"
        ),
    )
    .await?;
    let superseded = indexes.into_iter().filter(|i| i.unique).collect();
    attach_history(tx, "executions_unpartitioned", "executions_done", "created_at", superseded).await?;
    Ok(())
}

async fn convert_by_time(tx: &mut PgConnection, table: &str, column: &str) -> StoreResult<()> {
    let indexes = set_aside(tx, table, &format!("RANGE ({column})")).await?;
    let primary = indexes.iter().find(|i| i.primary);
    let mut statements = Vec::new();
    let mut primary_kept = false;
    if let Some(primary) = primary {
        let columns = primary.shape().unwrap_or_default().trim_start_matches(" USING btree ");
        let constraint = primary.constraint.clone().unwrap_or_else(|| format!("pk_{table}"));
        // A primary key of a partitioned table includes its partition key.
        primary_kept = columns.contains(column);
        let key =
            if primary_kept { columns.to_owned() } else { format!("{}, {column})", columns.trim_end_matches(')')) };
        statements.push(format!("ALTER TABLE {table} ADD CONSTRAINT {constraint} PRIMARY KEY {key}"));
    }
    statements.push(format!("CREATE TABLE {table}_default PARTITION OF {table} DEFAULT"));
    run(&mut *tx, &statements.join(";\n")).await?;
    index_tree(tx, table, &indexes).await?;
    // A primary key that already holds the partition key serves the new one as it is.
    let superseded = indexes.into_iter().filter(|i| i.unique && !(i.primary && primary_kept)).collect();
    attach_history(tx, &format!("{table}_unpartitioned"), table, column, superseded).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_condition_names_the_statuses_it_holds() {
        let index = |definition: &str| IndexDef {
            name: "i".into(),
            definition: definition.into(),
            primary: false,
            unique: false,
            constraint: None,
        };
        let claim = index("CREATE INDEX i ON public.executions USING btree (endpoint, run_at) WHERE (status = ANY (ARRAY['QUEUED'::text, 'RETRYING'::text]))");
        assert_eq!(claim.statuses().unwrap(), ["QUEUED", "RETRYING"]);
        let unhandled = index("CREATE INDEX i ON public.executions USING btree (completed_at) WHERE ((status = 'FAILED'::text) AND (failure_handled_at IS NULL))");
        assert_eq!(unhandled.statuses().unwrap(), ["FAILED"]);
        assert_eq!(
            index("CREATE INDEX i ON public.executions USING btree (job_id) WHERE (status <> 'RUNNING'::text)")
                .statuses(),
            None
        );
        assert_eq!(
            index("CREATE INDEX i ON public.executions USING btree (job_id) WHERE (retry_of IS NOT NULL)").statuses(),
            None
        );
        assert_eq!(index("CREATE INDEX i ON public.executions USING btree (job_id)").statuses(), None);
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_partition_spans_a_tenth_of_the_retention_within_bounds() {
        assert_eq!(window(Duration::from_secs(30 * 24 * 3600)), LONGEST);
        assert_eq!(window(Duration::from_secs(300)), Duration::from_secs(30));
        assert_eq!(window(Duration::from_secs(2)), SHORTEST);
        assert_eq!(window(Duration::ZERO), WITHOUT_RETENTION);
    }

    #[test]
    fn partition_names_carry_their_bounds() {
        let p = Partition::new("attempts", at("2026-11-28T01:45:00Z"), at("2026-11-28T01:45:30Z"));
        assert_eq!(p.name, "attempts_p20261128t014500_20261128t014530");
        assert_eq!(Partition::parse("attempts", &p.name), Some(p.clone()));
        let old = Partition::parse("executions_done", "executions_done_pmin_20261128t000001").unwrap();
        assert_eq!((old.from, old.to), (None, at("2026-11-28T00:00:01Z")));
        assert_eq!(Partition::parse("attempts", "attempts_default"), None);
        assert_eq!(Partition::parse("attempts", "execution_logs_p20261128t014500_20261128t014530"), None);
        assert!(p.name.len() <= 63 && "execution_logs_p20261128t014500_20261128t014530".len() <= 63);
    }

    #[test]
    fn partitions_are_made_from_the_newest_to_ahead_of_now() {
        let window = Duration::from_secs(60);
        let now = at("2026-11-28T01:45:20Z");
        // None yet: from the first boundary past the lead (never over a time rows are written
        // for now), to three spans past now.
        let made = to_make("t", &[], now, window);
        let spans: Vec<_> = made.iter().map(|p| (p.from.unwrap(), p.to)).collect();
        assert_eq!(spans.first().unwrap().0, at("2026-11-28T01:46:00Z"));
        assert_eq!(spans.last().unwrap().1, at("2026-11-28T01:49:00Z"));
        let close = to_make("t", &[], at("2026-11-28T01:45:55Z"), window);
        assert_eq!(close[0].from, Some(at("2026-11-28T01:47:00Z")), "01:46 is within the lead");
        // A day's span: from tomorrow.
        let days = to_make("t", &[], now, Duration::from_secs(86_400));
        assert_eq!(days.iter().map(|p| p.to).collect::<Vec<_>>(), [at("2026-11-30T00:00:00Z")]);
        assert!(spans.windows(2).all(|w| w[0].1 == w[1].0), "contiguous: {spans:?}");
        // Up to date: nothing.
        assert!(to_make("t", &made, now, window).is_empty());
        // Later on, from where the newest ends.
        let later = to_make("t", &made, at("2026-11-28T01:47:10Z"), window);
        assert_eq!(later.first().unwrap().from, Some(at("2026-11-28T01:49:00Z")));
        // After a long stop: from the next window (the gap is the DEFAULT partition's).
        let after_stop = to_make("t", &made, at("2026-11-28T03:00:10Z"), window);
        assert_eq!(after_stop.first().unwrap().from, Some(at("2026-11-28T03:01:00Z")));
        // The window grew: the next partition ends on the new window's boundary, joined with
        // the next when that is less than half a window away.
        let wider = to_make("t", &made, now, Duration::from_secs(3600));
        assert_eq!((wider[0].from, wider[0].to), (Some(at("2026-11-28T01:49:00Z")), at("2026-11-28T03:00:00Z")));
    }

    #[test]
    fn only_partitions_wholly_past_the_cutoff_are_dropped() {
        let made = to_make("t", &[], at("2026-11-28T01:44:20Z"), Duration::from_secs(60));
        let dropped = to_drop(&made, at("2026-11-28T01:47:00Z"));
        assert_eq!(
            dropped.iter().map(|p| p.to).collect::<Vec<_>>(),
            [at("2026-11-28T01:46:00Z"), at("2026-11-28T01:47:00Z")]
        );
        let old = Partition { name: "t_pmin_x".into(), from: None, to: at("2026-11-28T00:00:00Z") };
        assert_eq!(to_drop(std::slice::from_ref(&old), at("2026-11-28T00:00:00Z")), [old]);
    }
}
