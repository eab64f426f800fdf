//! The OpenAPI 3.1 document of the API. Each operation comes from its handler's
//! `#[utoipa::path]`, registered together with its route (`utoipa_axum::routes!` in each
//! module's `router()`), so a route cannot be served without being documented. What the
//! operations behind the API-key layer share is added here once ([`require_api_key`], called
//! where that layer is applied): the bearer API key, and the error responses with every
//! [`ErrorCode`] grouped by its HTTP status.

use std::collections::BTreeMap;

use serde_json::Value;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, OpenApi, Ref, ResponseBuilder};
use utoipa::{PartialSchema, ToSchema};

use super::error::ErrorCode;

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Task Executor API",
        description = "Register delivery endpoints (HTTP, Kafka, Redis Streams, WebAssembly plugins) and create jobs that fire now, later, or on a cron schedule; every fire is retried, recorded attempt by attempt, and observable here. Every route but the health checks and /metrics needs `Authorization: Bearer <API key>`.",
        license(name = "Apache-2.0")
    ),
    components(schemas(ErrorBody, ErrorDetail, ErrorCode))
)]
pub struct ApiDoc;

/// The body of every error response.
#[derive(ToSchema)]
#[allow(dead_code)] // Only described: errors are written by `ApiError`.
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    code: ErrorCode,
    /// For people: what is wrong, naming the field or the cause.
    message: String,
    /// Also in the `x-request-id` header; quote it when reporting a problem.
    request_id: String,
    /// Structured detail where there is some (each failing input path, say).
    #[schema(value_type = Option<Object>)]
    details: Option<Value>,
}

/// Mark every operation of `doc` as needing the API key, with the error responses that
/// brings. Called on the routes the API-key layer wraps, so the document follows the layer.
pub fn require_api_key(doc: &mut OpenApi) {
    let mut by_status: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for code in ErrorCode::ALL {
        by_status.entry(code.status().as_u16()).or_default().push(code.as_str());
    }
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            operation.security = Some(vec![SecurityRequirement::new("api_key", Vec::<String>::new())]);
            add_errors(operation, &by_status);
        }
    }
}

/// The document as served: the routes' operations and the API key's security scheme.
pub fn complete(mut doc: OpenApi) -> OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    components.security_schemes.insert("api_key".into(), SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    doc
}

/// Every error status an authenticated operation may answer, with the codes at that status.
/// 405 (a method the route lacks) and 503 (`/readyz` only) are not answers of a documented
/// operation.
fn add_errors(operation: &mut Operation, by_status: &BTreeMap<u16, Vec<&str>>) {
    for (status, codes) in by_status {
        if matches!(status, 405 | 503) || operation.responses.responses.contains_key(&status.to_string()) {
            continue;
        }
        let mut response = ResponseBuilder::new().description(format!("An error: {}.", codes.join(", "))).content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build(),
        );
        if *status == 429 {
            response = response.header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(u64::schema())
                    .description(Some(
                        "Seconds until the API key (or its tenant's create rate) may send again; absent when waiting does not help (QUOTA_EXCEEDED, a batch larger than the tenant's burst).",
                    ))
                    .build(),
            );
        }
        operation.responses.responses.insert(status.to_string(), response.build().into());
    }
}

/// The headers the API viewer at `/docs` is sent with, as the dashboard's pages are: only this
/// origin's scripts (Swagger UI's assets are in the binary), no framing, no sniffing. Styles may
/// be inline: Swagger UI sets them as it draws.
pub async fn docs_headers(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::http::header::{CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
    use axum::http::HeaderValue;
    let docs = request.uri().path() == "/docs" || request.uri().path().starts_with("/docs/");
    let mut response = next.run(request).await;
    if docs {
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                 connect-src 'self'; font-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
            ),
        );
        headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    }
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::api::ApiKeys;

    /// Served without an API key (and without the rate limit).
    const PUBLIC_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics"];

    /// Every route is registered through `utoipa_axum::routes!`, which documents it: a plain
    /// axum `.route(` (or `.route_service(`, `.nest(`) in the API would serve an undocumented
    /// route. The Swagger UI routes (`/docs`, `/openapi.json`) are the one exception, in mod.rs.
    #[test]
    fn every_route_is_registered_with_its_operation() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/api");
        let mut files = vec![std::path::PathBuf::from(dir)];
        let mut checked = 0;
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.ends_with("openapi.rs") {
                continue; // This test names what it looks for.
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for bypass in [".route(\"", ".route_service(", ".nest(", ".nest_service("] {
                assert!(
                    !text.contains(bypass),
                    "{} registers a route with {bypass}, outside the OpenAPI document",
                    path.display()
                );
            }
            checked += 1;
        }
        assert!(checked > 10, "read the API's sources");

        let doc = crate::api::documented(
            Arc::new(ApiKeys::from_hashes(Vec::new())),
            crate::api::audit::AuditLog::discard(),
            1,
        )
        .into_openapi();
        let doc = super::complete(doc);
        let mut operations = 0;
        for (path, item) in &doc.paths.paths {
            for (method, op) in [("GET", &item.get), ("POST", &item.post), ("PUT", &item.put), ("DELETE", &item.delete)]
            {
                let Some(op) = op else { continue };
                operations += 1;
                assert!(op.summary.as_deref().is_some_and(|s| !s.is_empty()), "{method} {path} has no summary");
                assert!(
                    op.responses.responses.keys().any(|status| status.starts_with('2')),
                    "{method} {path} documents no success"
                );
                let public = PUBLIC_PATHS.contains(&path.as_str());
                assert_eq!(op.security.is_some(), !public, "{method} {path}: the API key requirement");
                if !public {
                    for status in ["400", "401", "404", "429", "500"] {
                        assert!(op.responses.responses.contains_key(status), "{method} {path} lacks {status}");
                    }
                }
            }
        }
        // 20 authenticated resources' operations and the 3 public ones, as of this writing:
        // fewer means a route lost its document entry.
        assert!(operations >= 37, "{operations} operations documented");
    }
}
