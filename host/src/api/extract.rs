//! Request extractors that answer bad input with the API's error shape: a 400 naming the field
//! (or 413 for an oversize body), never axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::api::error::{ApiError, ErrorCode};

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
            if crate::api::server::is_deadline(&rejection) {
                ApiError::new(
                    ErrorCode::RequestTimeout,
                    "The request body did not arrive in time (TE_BODY_READ_TIMEOUT_SEC).",
                )
            } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(ErrorCode::PayloadTooLarge,
                    "The request body is larger than the server accepts (TE_MAX_BODY_BYTES; TE_PLUGIN_MAX_BYTES for plugins).",
                )
            } else {
                ApiError::invalid_request(format!("The request body could not be read: {}", rejection.body_text()))
            }
        })
    }
}

/// Refuse a request whose path or query string carries a NUL character (`%00`): no name or id
/// holds one, and PostgreSQL cannot even compare text with one (it would answer an error, not
/// "not found"). A raw NUL cannot reach here: the HTTP parser refuses it in a URI.
pub async fn reject_nul(request: Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let uri = request.uri();
    let nul = |s: &str| s.as_bytes().windows(3).any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0');
    if nul(uri.path()) {
        return ApiError::invalid_request("The request path holds a NUL character (%00); no name or id does.")
            .into_response();
    }
    if uri.query().is_some_and(nul) {
        return ApiError::invalid_request("The query string holds a NUL character (%00); no parameter takes one.")
            .into_response();
    }
    next.run(request).await
}

/// The largest magnitude a JSON number may have. PostgreSQL keeps JSON numbers as decimals and
/// writes them back in full (309 digits for 1.7976931348623157e308), and numbers that close to
/// the largest double do not parse back: a row holding one could be written but never read.
const MAX_NUMBER: f64 = 1e308;

/// What no stored value may hold: a NUL character in a string or key, or a number at the edge
/// of the double range.
fn unstorable(value: &serde_json::Value, path: &mut Vec<String>) -> Option<&'static str> {
    match value {
        serde_json::Value::String(s) if s.contains('\0') => {
            Some("holds a NUL character (\\u0000), which no field accepts")
        }
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|x| x.abs() >= MAX_NUMBER) => {
            Some("is a number too large to store: its magnitude must be below 1e308")
        }
        serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            path.push(format!("[{i}]"));
            let found = unstorable(item, path);
            if found.is_none() {
                path.pop();
            }
            found
        }),
        serde_json::Value::Object(map) => map.iter().find_map(|(key, item)| {
            path.push(key.clone());
            let found = if key.contains('\0') {
                Some("holds a NUL character (\\u0000), which no field accepts")
            } else {
                unstorable(item, path)
            };
            if found.is_none() {
                path.pop();
            }
            found
        }),
        _ => None,
    }
}

/// Whether `bytes` may hold what [`unstorable`] looks for: the escape `\u0000` (JSON's only way
/// to carry NUL), or an exponent of 308 and up, or a run of 300 digits. Only then is the body
/// walked, so ordinary bodies pay one scan.
fn may_be_unstorable(bytes: &[u8]) -> bool {
    if bytes.windows(6).any(|w| w == b"\\u0000") {
        return true;
    }
    let mut digits = 0;
    for (i, b) in bytes.iter().enumerate() {
        if b.is_ascii_digit() {
            digits += 1;
            if digits >= 300 {
                return true;
            }
        } else {
            digits = 0;
            if matches!(b, b'e' | b'E') {
                let exponent: Vec<u8> = bytes[i + 1..]
                    .iter()
                    .skip_while(|c| matches!(c, b'+' | b'-'))
                    .take_while(|c| c.is_ascii_digit())
                    .copied()
                    .collect();
                if exponent.len() >= 3 {
                    return true;
                }
            }
        }
    }
    false
}

/// Parse JSON, naming the field that failed. Messages quote field names and serde's
/// description of what was expected; a body is never echoed back whole.
///
/// Every string the API accepts is checked here for a NUL character (`\u0000`), which no
/// field may hold: PostgreSQL cannot store one, and a value accepted by one backend and
/// refused by the other would make them behave differently.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // The slower walk runs only for a body that may hold what no stored value may.
    if may_be_unstorable(bytes) {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
            let mut path = Vec::new();
            if let Some(problem) = unstorable(&value, &mut path) {
                let field = path.iter().fold(String::new(), |mut acc, part| {
                    if !acc.is_empty() && !part.starts_with('[') {
                        acc.push('.');
                    }
                    acc.push_str(part);
                    acc
                });
                return Err(ApiError::invalid_field(if field.is_empty() { "body" } else { &field }, problem));
            }
        }
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::invalid_request(format!("The request body is not valid JSON: {inner}."))
        } else if path == "." {
            ApiError::invalid_request(format!("Invalid request body: {inner}."))
        } else if path.ends_with("_at") {
            // chrono's "premature end of input" does not say what a time looks like.
            ApiError::invalid_field(
                &path,
                format!("{inner}: expected an RFC 3339 time such as 2026-01-01T09:00:00Z or 2026-01-01T10:00:00+01:00"),
            )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Body {
        run_at: chrono::DateTime<chrono::Utc>,
    }

    #[test]
    fn a_bad_time_names_the_field_and_the_form_expected() {
        let error = parse_json::<Body>(br#"{"run_at": "tomorrow"}"#).unwrap_err();
        assert!(error.message.starts_with("`run_at`: "), "{}", error.message);
        assert!(error.message.contains("RFC 3339 time such as 2026-01-01T09:00:00Z"), "{}", error.message);
        let ok = parse_json::<Body>(br#"{"run_at": "2026-01-01T10:00:00+01:00"}"#).unwrap();
        assert_eq!(ok.run_at.to_rfc3339(), "2026-01-01T09:00:00+00:00");
    }

    /// PostgreSQL gives 1.7976931348623157e308 back as 309 digits that do not parse again; such a
    /// number is refused, naming where it is, in either spelling.
    #[test]
    fn a_number_that_cannot_be_read_back_is_refused_with_its_path() {
        let huge = format!("1{}", "0".repeat(308));
        for number in ["-1.7976931348623157e+308", "1E308", huge.as_str()] {
            let body = format!(r#"{{"schema": {{"a": [1, {number}]}}}}"#);
            let error = parse_json::<serde_json::Value>(body.as_bytes()).unwrap_err();
            assert_eq!(
                error.message,
                "`schema.a[1]`: is a number too large to store: its magnitude must be below 1e308"
            );
        }
        let fine = parse_json::<serde_json::Value>(br#"{"a": 1.5e307, "b": -9.9e307, "e": "1e999 in a string"}"#);
        assert!(fine.is_ok(), "{fine:?}");
        let error = parse_json::<serde_json::Value>(br#"{"k": "a\u0000b"}"#).unwrap_err();
        assert_eq!(error.message, "`k`: holds a NUL character (\\u0000), which no field accepts");
    }
}
