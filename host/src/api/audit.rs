//! The audit trail: every request with a valid key whose method could change something (any
//! but GET, HEAD and OPTIONS) leaves a record — the key, its role, the route, the path, the
//! answer's status, the request id and the time — whatever it was answered, refusals included.
//! `GET /audit` lists a tenant's records to its `admin` keys and to operator keys.
//!
//! A request hands its record to [`AuditLog`] as its answer leaves, and a task writes the
//! records that queue up meanwhile in one statement: an audited request costs the database a
//! share of one insert, not a round trip of its own. A record is therefore written a moment
//! after its answer; a process killed in that moment loses the records not yet written (at
//! most [`MAX_BATCH`] rows a write, [`QUEUE`] waiting). When the database does not take a batch,
//! the batch is tried again after a second, three times, then dropped with a log line that
//! says how many records were lost.

use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::Caller;
use super::error::ApiResult;
use super::extract::ApiQuery;
use super::pagination::{paginate, ListOrder, ListOut, ListParams};
use super::state::AppState;
use super::tenants::administered_tenant;
use crate::domain::KeyRole;
use crate::ids::{ApiKeyId, AuditId};
use crate::store::{AuditRecord, PageKey, Store, DEFAULT_TENANT};

/// The most records one write takes.
pub const MAX_BATCH: usize = 500;
/// Records waiting to be written; a request whose record finds the queue full waits for room.
pub const QUEUE: usize = 10_000;
/// The longest path kept in a record, in characters.
pub const MAX_PATH_CHARS: usize = 1_000;

/// Where audited requests leave their records.
#[derive(Clone)]
pub struct AuditLog {
    records: mpsc::Sender<AuditRecord>,
}

impl AuditLog {
    /// A log whose records `store` receives, written by the task returned until `stop`; then
    /// what is queued is written and the task ends.
    pub fn spawn(
        store: std::sync::Arc<dyn Store>,
        stop: tokio_util::sync::CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (records, queue) = mpsc::channel(QUEUE);
        (Self { records }, tokio::spawn(write(store, queue, stop)))
    }

    /// A log that keeps nothing: for a router built only to describe the API.
    #[cfg(test)]
    pub fn discard() -> Self {
        Self { records: mpsc::channel(1).0 }
    }

    async fn record(&self, record: AuditRecord) {
        // Closed only when the writer has stopped (the process is ending).
        let _ = self.records.send(record).await;
    }
}

/// Write what queues up, a batch at a time; after `stop`, what is left.
async fn write(
    store: std::sync::Arc<dyn Store>,
    mut queue: mpsc::Receiver<AuditRecord>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = tokio::select! {
            received = queue.recv_many(&mut batch, MAX_BATCH) => received,
            () = stop.cancelled(), if !queue.is_closed() => {
                // No record is taken from now on; those already queued are still read.
                queue.close();
                continue;
            }
        };
        if received == 0 {
            return;
        }
        let mut tries = 0;
        while let Err(error) = store.audit_insert_many(&batch).await {
            tries += 1;
            if tries == 3 {
                tracing::error!(records = batch.len(), error = %crate::error_chain::describe(&error), "Could not write audit records; they are lost.");
                break;
            }
            tracing::warn!(records = batch.len(), error = %crate::error_chain::describe(&error), "Could not write audit records; trying again in a second.");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        batch.clear();
    }
}

/// The layer inside authentication that records each request that could change something.
pub async fn record(State(log): State<AuditLog>, request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    // Set by `auth::require_api_key`, which this layer runs inside.
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        return next.run(request).await;
    };
    let method = request.method().as_str().to_owned();
    let path: String = request.uri().path().chars().take(MAX_PATH_CHARS).collect();
    let route = request.extensions().get::<MatchedPath>().map_or_else(|| path.clone(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    let (tenant, key_id, role) = match caller {
        Caller::Tenant(key) => (key.tenant, Some(key.key_id), Some(key.role)),
        // An operator acts on the tenant its path names, and otherwise on `default`, which
        // holds every resource.
        Caller::Operator => (named_tenant(&path).unwrap_or(DEFAULT_TENANT).to_owned(), None, None),
    };
    log.record(AuditRecord {
        audit_id: AuditId::new(),
        tenant,
        key_id,
        role,
        method,
        route,
        path,
        status: i32::from(response.status().as_u16()),
        request_id: super::request_id::current(),
        at: Utc::now(),
    })
    .await;
    response
}

/// The tenant a `/tenants/{tenant}/…` path names.
fn named_tenant(path: &str) -> Option<&str> {
    path.strip_prefix("/tenants/")?.split('/').next().filter(|t| !t.is_empty())
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Items per page: 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// The `cursor` of the previous page.
    pub cursor: Option<String>,
    /// `newest` for newest first.
    pub order: Option<ListOrder>,
    /// Whose records (operator keys; a tenant's key sees its own). Default `default`.
    pub tenant: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AuditOut {
    pub audit_id: AuditId,
    pub tenant: String,
    /// The key issued to the tenant; null for an operator key.
    pub key_id: Option<ApiKeyId>,
    /// `admin`, `write` or `read`; `operator` for an operator key.
    pub role: String,
    pub method: String,
    /// The route's pattern, such as `/jobs/{id}/pause`.
    pub route: String,
    /// The path asked.
    pub path: String,
    /// The answer's HTTP status.
    pub status: i32,
    pub request_id: String,
    #[serde(serialize_with = "super::timestamp")]
    pub at: DateTime<Utc>,
}

impl From<AuditRecord> for AuditOut {
    fn from(r: AuditRecord) -> Self {
        Self {
            audit_id: r.audit_id,
            tenant: r.tenant,
            key_id: r.key_id,
            role: r.role.map_or("operator", KeyRole::as_str).to_owned(),
            method: r.method,
            route: r.route,
            path: r.path,
            status: r.status,
            request_id: r.request_id,
            at: r.at,
        }
    }
}

/// A tenant's audit records: every request with its key that could change something
/// (operator keys, and the tenant's `admin` keys).
#[utoipa::path(get, path = "/audit", tag = "tenants", params(AuditParams), responses(
    (status = 200, description = "A page of audit records, oldest first unless `order=newest`.", body = ListOut<AuditOut>),
))]
async fn list(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(params): ApiQuery<AuditParams>,
) -> ApiResult<Json<ListOut<AuditOut>>> {
    // A tenant's key reads its own tenant's records unless it names another (then a 404).
    let name = params.tenant.unwrap_or_else(|| match &caller {
        Caller::Tenant(key) => key.tenant.clone(),
        Caller::Operator => DEFAULT_TENANT.to_owned(),
    });
    let tenant = administered_tenant(&state, &caller, &name, "reads the audit trail").await?.name;
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page_request()?;
    let page = ListOrder::apply(params.order, page);
    let rows = state.store.audit_list(&tenant, &page).await?;
    Ok(Json(paginate(rows, &page, |r| PageKey { created_at: r.at, key: r.audit_id.as_str().to_owned() }, Into::into)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenant_a_path_names() {
        assert_eq!(named_tenant("/tenants/acme/api-keys"), Some("acme"));
        assert_eq!(named_tenant("/tenants/acme"), Some("acme"));
        assert_eq!(named_tenant("/tenants/"), None);
        assert_eq!(named_tenant("/jobs/job_1"), None);
    }
}
