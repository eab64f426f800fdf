//! The PostgreSQL store's upkeep of its own tables: the warning when autovacuum is off, the
//! per-table autovacuum settings, and the scheduler's vacuum (`Store::table_churn`,
//! `Store::vacuum`; `scheduler::vacuumer` decides when), on the maintenance pool.

use sqlx::PgPool;

use super::super::{Churn, StoreResult};

/// Every execution is written three times or more (queued, claimed, finished), and each
/// write leaves its old row version and index entries behind until VACUUM removes them; a
/// claim walks past every one left in the claim index. With autovacuum off they piled up, and
/// claims slowed down as finished work accumulated (benchmarks.md, "Soak"). The scheduler then
/// vacuums the queue's tables itself (`scheduler::vacuumer`, `TE_VACUUM=auto`); said once at
/// start, since the database's other tables are left to the operator.
pub(super) async fn warn_if_autovacuum_off(pool: &PgPool) {
    if let Ok((setting,)) = sqlx::query_as::<_, (String,)>("SHOW autovacuum").fetch_one(pool).await {
        if setting == "off" {
            tracing::warn!(
                "PostgreSQL's autovacuum is off: schedulers vacuum taskexec's queue tables themselves (TE_VACUUM=auto); \
                 turn it on (autovacuum = on, PostgreSQL's default) for the database's other tables."
            );
        }
    }
}

/// The tables every delivery writes and the purge deletes from: those that need vacuuming.
const CHURNING_TABLES: [&str; 4] = ["attempts", "execution_logs", "executions", "jobs"];

/// The tables that hold the rows of `$1` (each table itself, or where it is partitioned, its
/// partitions: `store::partitions`) with their dead and live rows. (`pg_partition_tree` lists
/// nothing for a table that is not partitioned.)
const CHURNING_LEAVES: &str = "SELECT c.relname::text, s.n_dead_tup, s.n_live_tup
     FROM UNNEST($1::text[]) AS t(name)
     JOIN pg_class root ON root.oid = to_regclass(t.name)
     CROSS JOIN LATERAL (SELECT relid FROM pg_partition_tree(root.oid) WHERE isleaf
                         UNION ALL
                         SELECT root.oid WHERE root.relkind = 'r') AS p
     JOIN pg_class c ON c.oid = p.relid
     JOIN pg_stat_user_tables s ON s.relid = p.relid
     ORDER BY 1";

/// Per-table autovacuum settings for the queue's churn (why: in the file).
pub(super) const AUTOVACUUM: &str = include_str!("../postgres_autovacuum.sql");

/// Connections of [`super::PgStore`]'s maintenance pool: the queue's vacuum, the history's, and the
/// partition upkeep, each a loop of its own.
pub const MAINTENANCE_POOL_SIZE: u32 = 3;

/// The pace of the scheduler's vacuum of a history table (`Store::vacuum`): autovacuum's own
/// (`autovacuum_vacuum_cost_delay`, 2 ms since PostgreSQL 12, at the default cost limit),
/// where a manual VACUUM runs unpaced.
const HISTORY_VACUUM_PACE: &str = "SET vacuum_cost_delay = '2ms'";

/// Vacuum `table` at [`HISTORY_VACUUM_PACE`], so that a vacuum of millions of rows is not the
/// queue's rival for the disk and the CPU, then `analyze` it unpaced, since an ANALYZE holds
/// back every vacuum for as long as it runs. The pace is a session setting, as VACUUM runs in
/// no transaction (so no SET LOCAL), reset after it. (Through a transaction-mode pooler the
/// setting may reach another server connection: it paces nothing but a VACUUM or an
/// ANALYZE, which only the vacuumer runs.)
async fn paced_vacuum(pool: &PgPool, table: &str, analyze: bool) -> StoreResult<()> {
    let mut connection = pool.acquire().await?;
    sqlx::query(HISTORY_VACUUM_PACE).persistent(false).execute(&mut *connection).await?;
    let vacuum = format!("VACUUM (SKIP_LOCKED) \"{table}\"");
    let vacuumed = sqlx::query(&vacuum).persistent(false).execute(&mut *connection).await;
    sqlx::query("RESET vacuum_cost_delay").persistent(false).execute(&mut *connection).await?;
    vacuumed?;
    if analyze {
        let analyze = format!("ANALYZE (SKIP_LOCKED) \"{table}\"");
        sqlx::query(&analyze).persistent(false).execute(&mut *connection).await?;
    }
    Ok(())
}

/// The dead and live rows of every table (or partition) that churns, and whether the
/// server's autovacuum is on (`Store::table_churn`).
pub(super) async fn churn(pool: &PgPool) -> StoreResult<Churn> {
    let (setting,): (String,) = sqlx::query_as("SHOW autovacuum").fetch_one(pool).await?;
    let tables = sqlx::query_as(CHURNING_LEAVES).bind(&CHURNING_TABLES[..]).fetch_all(pool).await?;
    Ok(Churn { autovacuum: setting == "on", tables })
}

/// Vacuum `table` (`Store::vacuum`).
pub(super) async fn vacuum(pool: &PgPool, table: &str) -> StoreResult<()> {
    // Only a table of the queue's (or one of their partitions), as the catalog names it:
    // the name goes into the statement's text.
    let leaves: Vec<(String, i64, i64)> =
        sqlx::query_as(CHURNING_LEAVES).bind(&CHURNING_TABLES[..]).fetch_all(pool).await?;
    let Some((table, _, _)) = leaves.iter().find(|(name, _, _)| name == table) else { return Ok(()) };
    // Each table is analyzed at most once a minute (the queue's partition) or ten (the
    // others), not at every vacuum: an ANALYZE holds a snapshot, unlike a VACUUM, and
    // while it runs no vacuum removes a dead row newer than it: in the short soak, the
    // ANALYZE of each `jobs` vacuum (every 10 s after a purge) left the queue's dead rows
    // to pile up to 180,000, and the rate fell by two thirds. The queue's statistics are
    // a moment's anyway (its size swings with the queue; the statements that read it take
    // their indexes whatever they say, `INDEX_PLANS`).
    let queue = super::super::is_queue_table(table);
    let (analyzed_lately,): (bool,) = sqlx::query_as(
        "SELECT COALESCE(GREATEST(last_analyze, last_autoanalyze) > now() - $2 * INTERVAL '1 minute', false)
             FROM pg_stat_user_tables WHERE relid = to_regclass($1)",
    )
    .bind(format!("\"{table}\""))
    .bind(if queue { 1.0 } else { 10.0 })
    .fetch_optional(pool)
    .await?
    .unwrap_or((false,));
    if queue {
        let options = if analyzed_lately { "SKIP_LOCKED" } else { "ANALYZE, SKIP_LOCKED" };
        sqlx::raw_sql(&format!("VACUUM ({options}) \"{table}\"")).execute(pool).await?;
        return Ok(());
    }
    paced_vacuum(pool, table, !analyzed_lately).await
}
