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

/// The share of its live rows a table's dead rows must pass to be vacuumed.
fn scale(table: &str) -> f64 {
    if table == "executions" || table == "executions_live" {
        SCALE
    } else {
        SCALE_REST
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

/// The tables due for a vacuum.
pub fn due(churn: &Churn, mode: VacuumMode) -> Vec<String> {
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
        .filter(|(table, dead, live)| *dead > THRESHOLD && *dead as f64 > scale(table) * *live as f64)
        .map(|(table, _, _)| table.clone())
        .collect()
}

pub async fn run(store: Arc<dyn Store>, mode: VacuumMode, every: Duration, shutdown: CancellationToken, beat: Beat) {
    let mut said = false;
    loop {
        beat.beat();
        let round = std::time::Instant::now();
        let result = vacuum_due(&store, mode, &mut said).await;
        crate::metrics::loop_round("vacuumer", round.elapsed(), result.is_err());
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

async fn vacuum_due(store: &Arc<dyn Store>, mode: VacuumMode, said: &mut bool) -> crate::store::StoreResult<()> {
    let churn = store.table_churn().await?;
    if !*said && mode == VacuumMode::Auto && !churn.autovacuum && !churn.tables.is_empty() {
        tracing::info!(
            "PostgreSQL's autovacuum is off: the scheduler vacuums the queue's tables itself (TE_VACUUM=auto)."
        );
        *said = true;
    }
    for table in due(&churn, mode) {
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
        assert_eq!(due(&churn(false), VacuumMode::Auto), ["executions"], "jobs at 0.3%, attempts below 2,000");
        assert!(due(&churn(true), VacuumMode::Auto).is_empty(), "autovacuum does it");
        assert_eq!(due(&churn(true), VacuumMode::Always), ["executions"]);
        assert!(due(&churn(false), VacuumMode::Off).is_empty());
    }
}
