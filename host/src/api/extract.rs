//! Request extractors that answer bad input with the API's error shape: a 400 naming the field
//! (or 413 for an oversize body), never axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body, parsed with the path of any failing field.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(ApiError::invalid_request(
                "The request body must be JSON, sent with `Content-Type: application/json`.",
            ));
        }
        let ApiBytes(bytes) = ApiBytes::from_request(request, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// A raw body, with an oversize body answered 413 in the API's error shape.
pub struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(request, state).await.map(ApiBytes).map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "PAYLOAD_TOO_LARGE",
                    "The request body is larger than the server accepts (TE_MAX_BODY_BYTES; TE_PLUGIN_MAX_BYTES for plugins).",
                )
            } else {
                ApiError::invalid_request(format!("The request body could not be read: {}", rejection.body_text()))
            }
        })
    }
}

/// Parse JSON, naming the field that failed. Messages quote field names and serde's
/// description of what was expected; a body is never echoed back whole.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::invalid_request(format!("The request body is not valid JSON: {inner}."))
        } else if path == "." {
            ApiError::invalid_request(format!("Invalid request body: {inner}."))
        } else {
            ApiError::invalid_field(&path, inner)
        }
    })?;
    deserializer.end().map_err(|e| ApiError::invalid_request(format!("The request body is not valid JSON: {e}.")))?;
    Ok(value)
}

/// Query parameters, with the failing parameter named.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|rejection| ApiError::invalid_request(format!("Invalid query string: {}", rejection.body_text())))
    }
}
