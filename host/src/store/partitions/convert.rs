//! The conversion of the plain tables the migrations make into the layout of
//! `store::partitions`, in one transaction, keeping every row.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use super::{align_down, literal, run, DONE_STATUSES, LIVE_STATUSES, NAME_TIME};
use crate::store::StoreResult;

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
}
