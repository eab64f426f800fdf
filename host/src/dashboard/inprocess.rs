//! The REST API called in-process: a page reads `GET /jobs/{id}` and a button posts
//! `POST /jobs/{id}/pause` through the API's own router, authenticated as the session's key
//! (by its hash, in the request's extensions: no client can send that), so the dashboard
//! applies every rule, check and error of the API and shows its output shapes, with no second
//! implementation to drift from it.

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

use super::tenancy::ApiAs;
use crate::api::auth::InProcessKey;

/// The largest API answer a page reads (a page of 200 executions with their inputs and outputs
/// fits many times over).
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub struct InProcessApi {
    router: Router,
}

/// What the API answered.
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    pub fn ok(&self) -> bool {
        self.status.is_success()
    }

    /// The API's error message (`{"error": {"message": …}}`), for a notice.
    pub fn message(&self) -> String {
        self.body["error"]["message"]
            .as_str()
            .map_or_else(|| format!("The API answered {}.", self.status), str::to_owned)
    }
}

impl InProcessApi {
    pub fn new(router: Router) -> Self {
        Self { router }
    }

    pub async fn get(&self, key: &ApiAs, path: &str) -> Answer {
        self.call(key, Method::GET, path, None).await
    }

    pub async fn post(&self, key: &ApiAs, path: &str, body: Option<Value>) -> Answer {
        self.call(key, Method::POST, path, body).await
    }

    async fn call(&self, key: &ApiAs, method: Method, path: &str, body: Option<Value>) -> Answer {
        let mut request = Request::builder().method(method).uri(path).extension(InProcessKey(key.hash));
        if let Some(tenant) = &key.tenant {
            request = request.header(crate::api::auth::TENANT_HEADER, tenant);
        }
        let body = match body {
            Some(body) => {
                request = request.header(CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        let Ok(request) = request.body(body) else {
            return Answer { status: StatusCode::BAD_REQUEST, body: Value::Null };
        };
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES).await.unwrap_or_default();
        Answer { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }
}
