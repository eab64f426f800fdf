//! Loop 6: the queue's own vacuum. Every execution leaves two dead row versions behind (its
//! claim and its result each replace the row, and neither can be a HOT update: both change
//! `status`, which the partial indexes name), and the purge deletes in bulk. Until VACUUM
//! removes them the claim and the result write read past them, and waves of 100,000
//! deliveries slowed from 3,860/s to 957/s by the fourth (issue 43; docs/benchmarks.md, "Soak").
//!
//! Where PostgreSQL's autovacuum runs, it does this, with per-table settings the store applies
//! at migration (`store/postgres_autovacuum.sql`). Where it is off — a server set up so, as
//! some managed and test servers are — the scheduler vacuums the queue's tables itself, under
//! the same rule: a table whose dead rows pass [`THRESHOLD`] and [`SCALE`] of its live rows
//! is vacuumed and analyzed (`VACUUM (ANALYZE, SKIP_LOCKED)`: a table another scheduler is
//! vacuuming is passed over). `TE_VACUUM` says when: `auto` (only when autovacuum is off, the
//! default), `always`, or `off`.
//!
//! Two loops, as autovacuum runs several workers: one for the queue's table, one for the
//! history's (`jobs`, `attempts`, …), whose vacuums read indexes of millions of rows and are
//! paced as autovacuum paces its own. In one loop, the queue waited behind them: in the soak,
//! a vacuum of a 3.3 M-row `jobs` left the queue unvacuumed meanwhile, and the window's rate
//! fell by 15-17%.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::health::Beat;
use crate::store::{Churn, Store};

/// Dead rows a table must have before it is vacuumed, whatever its size.
pub const THRESHOLD: i64 = 2_000;
/// …and this share of its live rows, for the tables the claim and the result write read
/// (the queue: `executions`, or where history is partitioned apart, `executions_live`; the
/// per-table autovacuum setting's scale factor).
pub const SCALE: f64 = 0.01;
/// …and this share, for the others (PostgreSQL's default). Their dead rows are the purge's
/// deletes, which no hot statement reads past, and a vacuum reads all of a table's indexes:
/// at 1%, `jobs` (as large as the retention's history) was vacuumed every round in the soak.
pub const SCALE_REST: f64 = 0.2;

/// The tables one vacuum loop looks after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tables {
    /// The queue's table: `executions`, or where history is partitioned apart, `executions_live`.
    Queue,
    /// The rest: history, jobs, and their partitions.
    History,
}

impl Tables {
    fn of(table: &str) -> Self {
        if crate::store::is_queue_table(table) {
            Self::Queue
        } else {
            Self::History
        }
    }

    /// The share of its live rows a table's dead rows must pass to be vacuumed.
    fn scale(self) -> f64 {
        match self {
            Self::Queue => SCALE,
            Self::History => SCALE_REST,
        }
    }

    /// The name of its loop, for the liveness report.
    pub fn loop_name(self) -> &'static str {
        match self {
            Self::Queue => "scheduler.vacuumer",
            Self::History => "scheduler.vacuumer.history",
        }
    }

    /// Its loop's `loop` label in `taskexec_scheduler_loop_duration_seconds`.
    pub fn metric_name(self) -> &'static str {
        match self {
            Self::Queue => "vacuumer",
            Self::History => "vacuumer_history",
        }
    }

    /// The longest a round of its loop may take: a paced vacuum of a history table of
    /// millions of rows takes minutes.
    pub fn longest_round(self) -> Duration {
        match self {
            Self::Queue => EVERY,
            Self::History => Duration::from_secs(15 * 60),
        }
    }
}
/// How often the tables' dead rows are looked at (one read of `pg_stat_user_tables`). At a
/// few thousand deliveries a second, 10 s let 80,000 dead rows pile up between looks, and
/// the soak's rate still fell by a third over 500,000 executions (benchmarks.md, "Soak").
pub const EVERY: std::time::Duration = std::time::Duration::from_secs(3);

/// When the scheduler vacuums the queue's tables itself (`TE_VACUUM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum VacuumMode {
    /// When the database's autovacuum is off.
    #[default]
    Auto,
    /// Whatever autovacuum does.
    Always,
    /// Never.
    Off,
}

/// The tables of `tables` due for a vacuum.
pub fn due(churn: &Churn, mode: VacuumMode, tables: Tables) -> Vec<String> {
    let ours = match mode {
        VacuumMode::Off => false,
        VacuumMode::Always => true,
        VacuumMode::Auto => !churn.autovacuum,
    };
    if !ours {
        return Vec::new();
    }
    churn
        .tables
        .iter()
        .filter(|(table, dead, live)| {
            let of = Tables::of(table);
            of == tables && *dead > THRESHOLD && *dead as f64 > of.scale() * *live as f64
        })
        .map(|(table, _, _)| table.clone())
        .collect()
}

pub async fn run(
    store: Arc<dyn Store>,
    mode: VacuumMode,
    tables: Tables,
    every: Duration,
    shutdown: CancellationToken,
    beat: Beat,
) {
    // One of the two loops says that it vacuums.
    let mut said = tables == Tables::History;
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let result = vacuum_due(&store, mode, tables, &mut said).await;
        crate::metrics::loop_round(tables.metric_name(), round.elapsed(), result.is_err());
        if let Err(error) = result {
            tracing::warn!(%error, "Vacuuming the queue's tables failed; retrying next round.");
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    beat.stopped();
}

async fn vacuum_due(
    store: &Arc<dyn Store>,
    mode: VacuumMode,
    tables: Tables,
    said: &mut bool,
) -> crate::store::StoreResult<()> {
    let churn = store.table_churn().await?;
    if !*said && mode == VacuumMode::Auto && !churn.autovacuum && !churn.tables.is_empty() {
        tracing::info!(
            "PostgreSQL's autovacuum is off: the scheduler vacuums the queue's tables itself (TE_VACUUM=auto)."
        );
        *said = true;
    }
    for table in due(&churn, mode, tables) {
        let started = std::time::Instant::now();
        store.vacuum(&table).await?;
        tracing::debug!(%table, took_ms = started.elapsed().as_millis() as u64, "Vacuumed.");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn churn(autovacuum: bool) -> Churn {
        Churn {
            autovacuum,
            tables: vec![
                ("executions".into(), 50_000, 300_000),
                ("jobs".into(), 1_000, 300_000),
                ("attempts".into(), 2_500, 10_000_000),
            ],
        }
    }

    #[test]
    fn tables_past_both_thresholds_are_due_when_autovacuum_is_off_or_when_told() {
        let queue = Tables::Queue;
        assert_eq!(due(&churn(false), VacuumMode::Auto, queue), ["executions"]);
        assert!(due(&churn(true), VacuumMode::Auto, queue).is_empty(), "autovacuum does it");
        assert_eq!(due(&churn(true), VacuumMode::Always, queue), ["executions"]);
        assert!(due(&churn(false), VacuumMode::Off, queue).is_empty());
        assert!(due(&churn(false), VacuumMode::Auto, Tables::History).is_empty(), "jobs at 0.3%, attempts below 2,000");
    }

    #[test]
    fn each_loop_vacuums_its_own_tables() {
        let churn = Churn {
            autovacuum: false,
            tables: vec![
                ("executions_live".into(), 5_000, 100_000),
                ("jobs".into(), 100_000, 300_000),
                ("attempts_p20261128t0900".into(), 2_500, 10_000),
            ],
        };
        assert_eq!(due(&churn, VacuumMode::Auto, Tables::Queue), ["executions_live"]);
        assert_eq!(due(&churn, VacuumMode::Auto, Tables::History), ["jobs", "attempts_p20261128t0900"]);
    }
}
