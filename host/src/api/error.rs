//! The API's error type: a stable [`ErrorCode`] (which owns its HTTP status) and a message for
//! the user. Every error body has docs/api.md's shape
//! `{ "error": { "code", "message", "request_id" } }`. docs/api.md's table of codes is checked
//! against [`ErrorCode`] by a test.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::request_id;
use crate::store::StoreError;

pub type ApiResult<T, E = ApiError> = Result<T, E>;

/// Every error code the API answers with, each with its HTTP status, from one table.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => ($text:literal, $status:ident)),+ $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant),+
        }

        impl ErrorCode {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            pub fn status(self) -> StatusCode {
                match self {
                    $(Self::$variant => StatusCode::$status),+
                }
            }
        }
    };
}

error_codes! {
    /// Malformed JSON, a wrong field, a bad name, `limit` or `cursor`, a NUL anywhere.
    InvalidRequest => ("INVALID_REQUEST", BAD_REQUEST),
    Unauthorized => ("UNAUTHORIZED", UNAUTHORIZED),
    /// A request that is one of this service's own deliveries (it bears the delivery mark).
    DeliveryRefused => ("DELIVERY_REFUSED", FORBIDDEN),
    /// The API key's role does not allow the request (a `read` key's POST, a `write` key's
    /// API-key route, a tenant key's operator route).
    Forbidden => ("FORBIDDEN", FORBIDDEN),
    TenantNotFound => ("TENANT_NOT_FOUND", NOT_FOUND),
    ApiKeyNotFound => ("API_KEY_NOT_FOUND", NOT_FOUND),
    PayloadSpecNotFound => ("PAYLOAD_SPEC_NOT_FOUND", NOT_FOUND),
    ConfigNotFound => ("CONFIG_NOT_FOUND", NOT_FOUND),
    SecretNotFound => ("SECRET_NOT_FOUND", NOT_FOUND),
    EndpointNotFound => ("ENDPOINT_NOT_FOUND", NOT_FOUND),
    JobNotFound => ("JOB_NOT_FOUND", NOT_FOUND),
    ExecutionNotFound => ("EXECUTION_NOT_FOUND", NOT_FOUND),
    PluginNotFound => ("PLUGIN_NOT_FOUND", NOT_FOUND),
    /// No such route.
    NotFound => ("NOT_FOUND", NOT_FOUND),
    MethodNotAllowed => ("METHOD_NOT_ALLOWED", METHOD_NOT_ALLOWED),
    /// Another resource has the name, or dependents block a delete.
    Conflict => ("CONFLICT", CONFLICT),
    JobNotUpdatable => ("JOB_NOT_UPDATABLE", CONFLICT),
    ExecutionNotCancellable => ("EXECUTION_NOT_CANCELLABLE", CONFLICT),
    /// An `on_failure` that names no endpoint.
    InvalidEndpointRef => ("INVALID_ENDPOINT_REF", UNPROCESSABLE_ENTITY),
    /// A retry of an execution that is not FAILED or CANCELLED.
    ExecutionNotRetryable => ("EXECUTION_NOT_RETRYABLE", CONFLICT),
    PayloadTooLarge => ("PAYLOAD_TOO_LARGE", PAYLOAD_TOO_LARGE),
    /// The body did not arrive within `TE_BODY_READ_TIMEOUT_SEC`, or the request took longer
    /// than `TE_REQUEST_TIMEOUT_SEC`.
    RequestTimeout => ("REQUEST_TIMEOUT", REQUEST_TIMEOUT),
    /// The API key is over `TE_API_RATE_LIMIT`, or its tenant over its create rate;
    /// `Retry-After` says when to come back.
    RateLimited => ("RATE_LIMITED", TOO_MANY_REQUESTS),
    /// The tenant holds as much as one of its quotas allows (endpoints, active cron jobs,
    /// unfinished executions), or the request asks past one (input size, cron interval).
    QuotaExceeded => ("QUOTA_EXCEEDED", TOO_MANY_REQUESTS),
    InvalidSchema => ("INVALID_SCHEMA", UNPROCESSABLE_ENTITY),
    InvalidPayloadSpecRef => ("INVALID_PAYLOAD_SPEC_REF", UNPROCESSABLE_ENTITY),
    InvalidConfigRef => ("INVALID_CONFIG_REF", UNPROCESSABLE_ENTITY),
    InvalidTemplate => ("INVALID_TEMPLATE", UNPROCESSABLE_ENTITY),
    TemplateResolutionFailed => ("TEMPLATE_RESOLUTION_FAILED", UNPROCESSABLE_ENTITY),
    InputValidationFailed => ("INPUT_VALIDATION_FAILED", UNPROCESSABLE_ENTITY),
    InvalidPlugin => ("INVALID_PLUGIN", UNPROCESSABLE_ENTITY),
    InvalidPluginRef => ("INVALID_PLUGIN_REF", UNPROCESSABLE_ENTITY),
    InvalidSpec => ("INVALID_SPEC", UNPROCESSABLE_ENTITY),
    InvalidCron => ("INVALID_CRON", UNPROCESSABLE_ENTITY),
    InternalError => ("INTERNAL_ERROR", INTERNAL_SERVER_ERROR),
    /// `/readyz` cannot reach the database.
    NotReady => ("NOT_READY", SERVICE_UNAVAILABLE),
}

/// In the OpenAPI document: the codes as a string enum.
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .enum_values(Some(Self::ALL.iter().map(|c| c.as_str())))
            .description(Some("A stable code; its HTTP status is fixed (see the error responses)."))
            .into()
    }
}

impl utoipa::ToSchema for ErrorCode {}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Structured detail beside the message (each failing input path, say).
    pub details: Option<serde_json::Value>,
    /// Seconds to wait before asking again (`Retry-After`), when waiting helps.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), details: None, retry_after: None }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 INVALID_REQUEST, naming the field at fault.
    pub fn invalid_field(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidRequest, format!("`{field}`: {problem}"))
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "Missing or invalid API key: send `Authorization: Bearer <key>`.")
    }

    /// A failure the user cannot fix: the details go to the log with the request id, the user
    /// gets the id to quote.
    pub fn internal(error: &(dyn std::error::Error + 'static)) -> Self {
        let chain = crate::error_chain::describe(error);
        tracing::error!(request_id = %request_id::current(), error = %chain, "Request failed.");
        Self::new(
            ErrorCode::InternalError,
            "The server failed to handle this request; quote the request id when reporting it.",
        )
    }
}

/// A request past one of its tenant's quotas: `429 RATE_LIMITED` with `Retry-After` for the
/// create rate (when waiting helps), `429 QUOTA_EXCEEDED` for the others; the message names
/// the quota, the tenant and the limit.
impl From<crate::quota::OverQuota> for ApiError {
    fn from(over: crate::quota::OverQuota) -> Self {
        let code = match over.quota {
            crate::quota::Quota::CreatesPerSecond => ErrorCode::RateLimited,
            _ => ErrorCode::QuotaExceeded,
        };
        let mut error = Self::new(code, format!("{over}."));
        error.retry_after = over.retry_after.map(crate::api::throttle::retry_after_seconds);
        error
    }
}

impl From<crate::quota::Refused> for ApiError {
    fn from(refused: crate::quota::Refused) -> Self {
        match refused {
            crate::quota::Refused::Over(over) => over.into(),
            crate::quota::Refused::Store(error) => error.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        Self::internal(&error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "error": { "code": self.code.as_str(), "message": self.message, "request_id": request_id::current() }
        });
        if let Some(details) = self.details {
            body["error"]["details"] = details;
        }
        let mut response = (self.code.status(), Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// docs/api.md's table of error codes: each code with its status.
    fn documented() -> BTreeMap<String, u16> {
        let doc = include_str!("../../../docs/api.md");
        let table = doc.split("## Error codes").nth(1).expect("docs/api.md has an Error codes section");
        let mut codes = BTreeMap::new();
        for row in table.lines().take_while(|l| !l.starts_with("## ")).filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let Ok(status) = cells[1].parse::<u16>() else { continue };
            for code in cells[2].split(',').map(str::trim) {
                codes.insert(code.to_owned(), status);
            }
        }
        codes
    }

    #[test]
    fn the_documented_codes_are_the_codes_with_their_statuses() {
        let in_code: BTreeMap<String, u16> =
            ErrorCode::ALL.iter().map(|c| (c.as_str().to_owned(), c.status().as_u16())).collect();
        assert_eq!(documented(), in_code, "docs/api.md's error table and ErrorCode disagree");
    }
}
