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

mod convert;
mod upkeep;

pub use convert::convert;
pub use upkeep::upkeep;
#[cfg(test)]
pub(super) use upkeep::{JOBS_DELETE, JOBS_PURGE_PLANS};

use super::StoreResult;

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
/// partitions hold the history), within `SHORTEST` and `LONGEST`; `WITHOUT_RETENTION`
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

/// The partitions to make so that `existing` reach the `horizon` past `now`: from where
/// the newest ends, or (with none, or none reaching `LEAD` past now) from the first
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

/// SQLSTATE 55P03, lock_not_available: `lock_timeout` passed.
fn lock_timed_out(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
