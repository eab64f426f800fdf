//! Lists a page at a time: keyset pagination in (creation time, key) order.

use super::{query, Db, Row};
use crate::store::{DbTime, PageRequest, StoreResult};

/// What a list reads: `SELECT columns FROM from`, in (`time_column`, `key`) order.
pub struct List<'a> {
    pub columns: &'a str,
    /// A table, or a subquery with its alias.
    pub from: &'a str,
    pub time_column: &'a str,
    pub key: &'a str,
    /// A condition written into the statement: a partial index whose predicate it is can then
    /// serve the page, which a bound value never lets a generic plan prove.
    pub written: Option<&'a str>,
    /// Columns that must equal the given values (bound).
    pub filters: &'a [(&'a str, &'a str)],
    /// Columns that must match the given `LIKE` patterns (bound): a tenant's rows, by the
    /// endpoint names they hold ([`tenant_condition`]).
    pub patterns: &'a [(&'a str, &'a str)],
}

/// One page of `list`, strictly after the page's cursor (before it, newest first, when the
/// page asks for that).
pub async fn page<T: Row>(db: Db<'_>, list: &List<'_>, page: &PageRequest) -> StoreResult<Vec<T>> {
    let equal = list.filters.iter().map(|(column, _)| format!("{column} = "));
    let like = list.patterns.iter().map(|(column, _)| format!("{column} LIKE "));
    let mut conditions: Vec<String> =
        equal.chain(like).enumerate().map(|(i, test)| format!("{test}${}", i + 1)).collect();
    conditions.extend(list.written.map(str::to_owned));
    let mut next = list.filters.len() + list.patterns.len() + 1;
    let (beyond, direction) = if page.newest_first { ("<", "DESC") } else { (">", "ASC") };
    let (time_column, key) = (list.time_column, list.key);
    if page.after.is_some() {
        // Row-value comparison: everything after the last row shown, so rows inserted
        // meanwhile never shift a page (they sort after `now`).
        conditions.push(format!("({time_column}, {key}) {beyond} (${next}, ${})", next + 1));
        next += 2;
    }
    let filter = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
    let sql = format!(
        "SELECT {} FROM {} {filter} ORDER BY {time_column} {direction}, {key} {direction} LIMIT ${next}",
        list.columns, list.from
    );
    let mut query = query(&sql);
    for (_, value) in list.filters.iter().chain(list.patterns) {
        query = query.bind(*value);
    }
    if let Some(after) = &page.after {
        query = query.bind(DbTime(after.created_at)).bind(&after.key);
    }
    query.bind(page.limit).fetch_all(db).await
}

/// The SQL condition that `column`, an endpoint's stored name, is `tenant`'s, with `?` where
/// the pattern it binds goes, if it binds one (`domain::tenant`: the `default` tenant's names
/// hold no `/`; another's begin `tenant/`, and a tenant's name has no `%`, `_` or `\\`).
pub(crate) fn tenant_condition(column: &str, tenant: &str) -> (String, Option<String>) {
    if tenant == crate::domain::DEFAULT_TENANT {
        (format!("{column} NOT LIKE '%/%'"), None)
    } else {
        (format!("{column} LIKE ?"), Some(format!("{tenant}/%")))
    }
}
