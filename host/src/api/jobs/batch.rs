//! `POST /jobs/batch`: up to [`MAX_BATCH`] creates in one request, each checked and answered on
//! its own, the valid ones written in one transaction.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::idempotency::IdempotencyKey;
use super::requests::JobIn;
use super::responses::JobOut;
use super::{answer, endpoint_gone, endpoint_not_found, held_within_quotas, prepare, wake, Prepared};
use crate::api::error::{ApiError, ApiResult};
use crate::api::extract::{parse_json, ApiJson};
use crate::api::state::AppState;
use crate::api::Created;
use crate::domain::Scope;
use crate::store::Endpoint;

/// The most jobs one batch creates.
pub const MAX_BATCH: usize = 1000;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchIn {
    /// 1 to 1,000 job bodies, each as `POST /jobs` takes it (each with its own
    /// `idempotency_key`).
    // Kept as the text given until each is checked on its own (as `POST /jobs` parses its
    // body), so a batch is parsed once, not read into a tree and written out again per job.
    #[schema(value_type = Vec<JobIn>)]
    pub jobs: Vec<Box<RawValue>>,
}

/// How one job of a batch fared.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ItemResult {
    /// Created now.
    Created,
    /// An idempotent repeat of a job created before: that job.
    Existing,
    /// Refused: `error` says why, in the API's error shape.
    Error,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BatchItemOut {
    /// The item's place in `jobs`, from 0.
    pub index: usize,
    pub result: ItemResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobOut>,
    /// `{"code", "message"}` as a single create would have answered (`details` for input
    /// validation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct BatchOut {
    pub created: usize,
    pub existing: usize,
    pub errors: usize,
    /// One per job, in the order given.
    pub items: Vec<BatchItemOut>,
}

fn error_item(index: usize, error: &ApiError) -> BatchItemOut {
    let mut body = serde_json::json!({ "code": error.code.as_str(), "message": error.message });
    if let Some(details) = &error.details {
        body["details"] = details.clone();
    }
    BatchItemOut { index, result: ItemResult::Error, job: None, error: Some(body) }
}

/// Create up to 1,000 jobs in one request.
///
/// Each job is checked as `POST /jobs` would check it and answered on its own: `created`,
/// `existing` (an idempotent repeat, with the first job) or `error` (with the code and message a
/// single create would have answered). The valid ones are written in one transaction. The
/// request fails as a whole (`400`) only when `jobs` is missing, empty or longer than 1,000.
#[utoipa::path(post, path = "/jobs/batch", tag = "jobs", request_body = BatchIn,
    params(("Idempotency-Key" = Option<String>, Header, description = "Keys the whole batch (1-251 characters): job `i` takes the key `{header}:{i}`, so the same batch sent again answers each job `existing`. Its jobs then name no `idempotency_key` of their own.")),
    responses(
        (status = 200, description = "One result per job, in order.", body = BatchOut),
))]
pub(super) async fn create_batch(
    State(state): State<AppState>,
    scope: Scope,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<BatchIn>,
) -> ApiResult<Json<BatchOut>> {
    if body.jobs.is_empty() || body.jobs.len() > MAX_BATCH {
        return Err(ApiError::invalid_field(
            "jobs",
            format!("must hold 1 to {MAX_BATCH} jobs, got {}", body.jobs.len()),
        ));
    }
    key.check_batch()?;
    // The tenant's create rate, for the whole batch at once (each job counts).
    state.quotas.take_creates(scope.tenant(), u32::try_from(body.jobs.len()).unwrap_or(u32::MAX))?;
    let mut items: Vec<Option<BatchItemOut>> = (0..body.jobs.len()).map(|_| None).collect();
    let mut endpoints: HashMap<String, Option<Endpoint>> = HashMap::new();
    let mut ready: Vec<(usize, Prepared)> = Vec::new();
    for (index, job) in body.jobs.into_iter().enumerate() {
        let mut job: JobIn = match parse_json(job.get().as_bytes()) {
            Ok(job) => job,
            Err(error) => {
                items[index] = Some(error_item(index, &error));
                continue;
            }
        };
        // Two ways of keying one batch refuse the whole request, as a single create's do.
        job.idempotency_key = key.for_batch_job(index, job.idempotency_key.take())?;
        match check(&state, &scope, job, &mut endpoints).await {
            Ok(prepared) => ready.push((index, prepared)),
            Err(error) => items[index] = Some(error_item(index, &error)),
        }
    }
    // What the batch would hold of the tenant's counted quotas: all of it, or none.
    let ready_refs: Vec<&Prepared> = ready.iter().map(|(_, p)| p).collect();
    held_within_quotas(&state, &scope, &ready_refs).await?;
    let writes: Vec<_> = ready.iter().map(|(_, p)| (&p.new.job, p.new.execution.as_ref())).collect();
    let inserted = state.store.job_insert_many(&writes).await?;
    let mut created = Vec::new();
    for ((index, prepared), inserted) in ready.iter().zip(inserted) {
        let answered = match inserted {
            Ok(inserted) => answer(&state, prepared, inserted).await,
            Err(error) => Err(endpoint_gone(error, &prepared.new.job.endpoint)),
        };
        items[*index] = Some(match answered {
            Ok(Created(status, job)) => {
                let result = if status == StatusCode::CREATED {
                    created.push(prepared);
                    ItemResult::Created
                } else {
                    ItemResult::Existing
                };
                BatchItemOut { index: *index, result, job: Some(job), error: None }
            }
            Err(error) => error_item(*index, &error),
        });
    }
    wake(&state, &created).await;
    let items: Vec<BatchItemOut> = items.into_iter().flatten().collect();
    let count = |wanted: fn(&ItemResult) -> bool| items.iter().filter(|i| wanted(&i.result)).count();
    Ok(Json(BatchOut {
        created: count(|r| matches!(r, ItemResult::Created)),
        existing: count(|r| matches!(r, ItemResult::Existing)),
        errors: count(|r| matches!(r, ItemResult::Error)),
        items,
    }))
}

/// One item checked as a single create is.
async fn check(
    state: &AppState,
    scope: &Scope,
    body: JobIn,
    endpoints: &mut HashMap<String, Option<Endpoint>>,
) -> ApiResult<Prepared> {
    if !endpoints.contains_key(&body.endpoint) {
        let endpoint = state.store.endpoint_get(&scope.stored(&body.endpoint)).await?;
        endpoints.insert(body.endpoint.clone(), endpoint);
    }
    let Some(endpoint) = endpoints[&body.endpoint].as_ref() else {
        return Err(endpoint_not_found(&body.endpoint));
    };
    prepare(state, scope, body, endpoint).await
}
