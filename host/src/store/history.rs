//! Reading executions and their history: one execution, a job's, a filtered list, what failed
//! and nothing retries, an execution's attempts and logs, the counts and samples the dashboard
//! and metrics show. The fixed statements are in `sql/history.sql`; a list's is put together
//! per call from its filters.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::engine::{execution_conditions, settled_or_running, ATTEMPT_COLUMNS, EXECUTION_COLUMNS, LOG_COLUMNS};
use super::sql::pages::{self, tenant_condition, List};
use super::sql::statements::history as sql;
use super::sql::{query, SqlBackend};
use super::{
    now, ActivitySample, Attempt, DbTime, Execution, ExecutionFilter, ExecutionLog, PageKey, PageRequest, StoreResult,
    RETRY_KEY_PREFIX,
};
use crate::domain::ExecutionStatus;
use crate::ids::{ExecutionId, JobId};

/// The executions' reads' part of the store.
#[async_trait]
pub trait History: Send + Sync {
    /// Executions not yet finished (PENDING, QUEUED, RUNNING, RETRYING), counted by status: of
    /// one tenant's endpoints, or (None) of every tenant's.
    async fn execution_counts(&self, tenant: Option<&str>) -> StoreResult<Vec<(ExecutionStatus, i64)>>;
    /// The newest executions created at or after `since`, at most `limit`, newest first: what
    /// the dashboard's overview charts (a few columns each, read by creation time), of one
    /// tenant's endpoints or (None) of every tenant's.
    async fn execution_activity(
        &self,
        since: DateTime<Utc>,
        limit: i64,
        tenant: Option<&str>,
    ) -> StoreResult<Vec<ActivitySample>>;
    async fn execution_get(&self, execution_id: &ExecutionId) -> StoreResult<Option<Execution>>;
    /// A job's first execution (the one a one-shot job's responses show).
    async fn execution_first(&self, job_id: &JobId) -> StoreResult<Option<Execution>>;
    /// A job's most recently created execution.
    async fn execution_last(&self, job_id: &JobId) -> StoreResult<Option<Execution>>;
    async fn execution_list(
        &self,
        job_id: &JobId,
        status: Option<ExecutionStatus>,
        page: &PageRequest,
    ) -> StoreResult<Vec<Execution>>;
    /// Executions across jobs matching `filter`, in creation order, a page at a time.
    async fn execution_search(&self, filter: &ExecutionFilter, page: &PageRequest) -> StoreResult<Vec<Execution>>;
    /// At most `limit` FAILED or CANCELLED executions matching `filter` that nothing retries
    /// yet, oldest first.
    async fn execution_unretried(&self, filter: &ExecutionFilter, limit: i64) -> StoreResult<Vec<Execution>>;
    async fn attempt_list(&self, execution_id: &ExecutionId, page: &PageRequest) -> StoreResult<Vec<Attempt>>;
    async fn log_list(&self, execution_id: &ExecutionId, page: &PageRequest) -> StoreResult<Vec<ExecutionLog>>;
    /// FAILED executions the failure notifier has not dealt with yet, oldest failure first.
    async fn failures_unhandled(&self, limit: i64) -> StoreResult<Vec<Execution>>;
    /// Record that the failure notifier dealt with this failed execution.
    async fn failure_handled(&self, execution_id: &ExecutionId) -> StoreResult<()>;
    /// SUCCESS executions with an `on_success` callback not yet made, oldest success first.
    async fn successes_unhandled(&self, limit: i64) -> StoreResult<Vec<Execution>>;
    /// Record that the callback notifier dealt with this successful execution.
    async fn success_handled(&self, execution_id: &ExecutionId) -> StoreResult<()>;
}

/// Executions matching `filter` (plus `extra` conditions), in creation order, strictly after
/// `after`, at most `limit`.
async fn filtered(
    store: &impl SqlBackend,
    filter: &ExecutionFilter,
    extra: &[&str],
    after: Option<&PageKey>,
    limit: i64,
    newest_first: bool,
) -> StoreResult<Vec<Execution>> {
    let (mut conditions, mut next) = execution_conditions(filter);
    conditions.extend(extra.iter().map(|c| (*c).to_owned()));
    let (beyond, direction) = if newest_first { ("<", "DESC") } else { (">", "ASC") };
    if after.is_some() {
        conditions.push(format!("(created_at, execution_id) {beyond} (${next}, ${})", next + 1));
        next += 2;
    }
    let text = settled_or_running(EXECUTION_COLUMNS, &conditions, direction, &format!("${next}"));
    let mut list = query(&text);
    // In the order execution_conditions numbered them.
    if let Some(status) = filter.status {
        list = list.bind(status);
    }
    if let Some(endpoint) = &filter.endpoint {
        list = list.bind(endpoint);
    }
    if let Some(job_id) = &filter.job_id {
        list = list.bind(job_id);
    }
    if let Some(t) = filter.created_after {
        list = list.bind(DbTime(t));
    }
    if let Some(t) = filter.created_before {
        list = list.bind(DbTime(t));
    }
    if let Some((_, Some(pattern))) = filter.tenant.as_deref().map(|t| tenant_condition("endpoint", t)) {
        list = list.bind(pattern);
    }
    if let Some(after) = after {
        list = list.bind(DbTime(after.created_at)).bind(&after.key);
    }
    list.bind(limit).fetch_all(store.db()).await
}

/// A job's first (or newest) execution.
async fn execution_by(store: &impl SqlBackend, job_id: &JobId, newest: bool) -> StoreResult<Option<Execution>> {
    let order = if newest { "DESC" } else { "ASC" };
    let text = settled_or_running(EXECUTION_COLUMNS, &["job_id = $1".to_owned()], order, "1");
    query(&text).bind(job_id).fetch_optional(store.db()).await
}

#[async_trait]
impl<S: SqlBackend> History for S {
    async fn execution_counts(&self, tenant: Option<&str>) -> StoreResult<Vec<(ExecutionStatus, i64)>> {
        match tenant {
            None => query(sql::EXECUTION_COUNTS).fetch_all(self.db()).await,
            Some(tenant) => query(sql::EXECUTION_COUNTS_OF_TENANT).bind(tenant).fetch_all(self.db()).await,
        }
    }

    async fn execution_activity(
        &self,
        since: DateTime<Utc>,
        limit: i64,
        tenant: Option<&str>,
    ) -> StoreResult<Vec<ActivitySample>> {
        // A list's filter of its own: created since, of the tenant.
        let filter = ExecutionFilter {
            created_after: Some(since),
            tenant: tenant.map(str::to_owned),
            ..ExecutionFilter::default()
        };
        let (conditions, next) = execution_conditions(&filter);
        let text = settled_or_running(
            "execution_id, endpoint, status, run_at, scheduled_at, claimed_at, completed_at, created_at",
            &conditions,
            "DESC",
            &format!("${next}"),
        );
        // In the order execution_conditions numbered them.
        let mut activity = query(&text).bind(DbTime(since));
        if let Some((_, Some(pattern))) = tenant.map(|t| tenant_condition("endpoint", t)) {
            activity = activity.bind(pattern);
        }
        activity.bind(limit).fetch_all(self.db()).await
    }

    async fn execution_get(&self, execution_id: &ExecutionId) -> StoreResult<Option<Execution>> {
        query(sql::EXECUTION_GET).bind(execution_id).fetch_optional(self.db()).await
    }

    async fn execution_first(&self, job_id: &JobId) -> StoreResult<Option<Execution>> {
        execution_by(self, job_id, false).await
    }

    async fn execution_last(&self, job_id: &JobId) -> StoreResult<Option<Execution>> {
        execution_by(self, job_id, true).await
    }

    async fn execution_list(
        &self,
        job_id: &JobId,
        status: Option<ExecutionStatus>,
        page: &PageRequest,
    ) -> StoreResult<Vec<Execution>> {
        let filter = ExecutionFilter { job_id: Some(job_id.to_string()), status, ..ExecutionFilter::default() };
        filtered(self, &filter, &[], page.after.as_ref(), page.limit, page.newest_first).await
    }

    async fn execution_search(&self, filter: &ExecutionFilter, page: &PageRequest) -> StoreResult<Vec<Execution>> {
        filtered(self, filter, &[], page.after.as_ref(), page.limit, page.newest_first).await
    }

    async fn execution_unretried(&self, filter: &ExecutionFilter, limit: i64) -> StoreResult<Vec<Execution>> {
        // A retry is keyed `retry:{execution id}` in the same job, so the unique index on
        // (job_id, idempotency_key) answers "already retried?".
        let unretried = format!(
            "NOT EXISTS (SELECT 1 FROM executions r WHERE r.job_id = executions.job_id
                 AND r.idempotency_key = '{RETRY_KEY_PREFIX}' || executions.execution_id)"
        );
        let finished = "status IN ('FAILED', 'CANCELLED')";
        filtered(self, filter, &[finished, &unretried], None, limit, false).await
    }

    async fn attempt_list(&self, execution_id: &ExecutionId, page: &PageRequest) -> StoreResult<Vec<Attempt>> {
        let filters = [("execution_id", execution_id.as_str())];
        let list = List {
            columns: ATTEMPT_COLUMNS,
            from: "attempts",
            time_column: "created_at",
            key: "attempt_id",
            written: None,
            filters: &filters,
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn log_list(&self, execution_id: &ExecutionId, page: &PageRequest) -> StoreResult<Vec<ExecutionLog>> {
        let filters = [("execution_id", execution_id.as_str())];
        let list = List {
            columns: LOG_COLUMNS,
            from: "execution_logs",
            time_column: "logged_at",
            key: "log_id",
            written: None,
            filters: &filters,
            patterns: &[],
        };
        pages::page(self.db(), &list, page).await
    }

    async fn failures_unhandled(&self, limit: i64) -> StoreResult<Vec<Execution>> {
        query(sql::FAILURES_UNHANDLED).bind(limit).fetch_all(self.db()).await
    }

    async fn failure_handled(&self, execution_id: &ExecutionId) -> StoreResult<()> {
        query(sql::FAILURE_HANDLED).bind(execution_id).bind(DbTime(now())).execute(self.db()).await?;
        Ok(())
    }

    async fn successes_unhandled(&self, limit: i64) -> StoreResult<Vec<Execution>> {
        query(sql::SUCCESSES_UNHANDLED).bind(limit).fetch_all(self.db()).await
    }

    async fn success_handled(&self, execution_id: &ExecutionId) -> StoreResult<()> {
        query(sql::SUCCESS_HANDLED).bind(execution_id).bind(DbTime(now())).execute(self.db()).await?;
        Ok(())
    }
}
