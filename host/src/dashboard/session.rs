//! Who is looking: the login form, the session cookie and the CSRF token.
//!
//! Signing in checks an API key as the API does and stores it in the `te_ui` cookie: `HttpOnly`
//! (no script reads it), `SameSite=Strict` (no other site's page sends it), scoped to `/ui`,
//! `Secure` behind a TLS proxy that says so (`X-Forwarded-Proto: https`), and gone when the
//! browser closes. Every request checks the key again, so a key removed from `TE_API_KEYS`
//! ends its sessions at the next restart. Every form carries a token derived from the key,
//! and a form posted from another site (by `Sec-Fetch-Site` or `Origin`) is refused as well.

use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use axum::http::{request::Parts, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::pages::render;
use super::Dashboard;

const COOKIE_NAME: &str = "te_ui";

/// A signed-in browser: its API key, and the token its forms must carry.
pub struct Session {
    pub key: String,
    pub csrf: String,
}

impl Session {
    /// Refuse a form posted without the token this signed-in key's pages carry, or from another site.
    pub fn check_form(&self, headers: &HeaderMap, token: &str) -> Result<(), StaleForm> {
        let cross_site = headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes() == b"cross-site")
            || match (headers.get("origin"), headers.get("host")) {
                (Some(origin), Some(host)) => {
                    let origin = origin.to_str().unwrap_or_default();
                    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
                    origin != "null" && origin_host.as_bytes() != host.as_bytes()
                }
                _ => false,
            };
        if cross_site || !bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes())) {
            return Err(StaleForm);
        }
        Ok(())
    }
}

/// A form refused for its token or its origin.
#[derive(Debug)]
pub struct StaleForm;

impl IntoResponse for StaleForm {
    fn into_response(self) -> Response {
        (StatusCode::FORBIDDEN, "This form is stale or came from another site; reload the page.").into_response()
    }
}

/// The CSRF token of the session holding `key`: a digest, so it says nothing of the key.
fn csrf_token(key: &str) -> String {
    let digest = Sha256::digest(format!("taskexec-ui-csrf:{key}").as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

fn cookie_key(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('=').map(str::to_owned))
        .and_then(|encoded| {
            url::form_urlencoded::parse(format!("k={encoded}").as_bytes()).next().map(|(_, v)| v.into_owned())
        })
}

impl FromRequestParts<Dashboard> for Session {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, ui: &Dashboard) -> Result<Self, Response> {
        match cookie_key(&parts.headers).filter(|key| ui.keys.verify(key).is_some()) {
            Some(key) => Ok(Self { csrf: csrf_token(&key), key }),
            None if parts.uri.path() == "/ui/live" => Err(StatusCode::UNAUTHORIZED.into_response()),
            None => {
                let next: String = url::form_urlencoded::byte_serialize(
                    parts.uri.path_and_query().map_or("/ui", |p| p.as_str()).as_bytes(),
                )
                .collect();
                Err(see_other(&format!("/ui/login?next={next}")))
            }
        }
    }
}

/// A 303 to `location` (after a form: the browser follows it with a GET).
pub fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    response
}

/// Where to go after signing in: a dashboard path, never another site.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(next) if next.starts_with("/ui") && !next.contains("//") && !next.contains('\\') => next,
        _ => "/ui",
    }
}

#[derive(Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

pub async fn login_form(State(ui): State<Dashboard>, Query(query): Query<LoginQuery>) -> Response {
    let next = safe_next(query.next.as_deref()).to_owned();
    render(&ui, "login.html", minijinja::context! { next, error => Option::<String>::None })
}

#[derive(Deserialize)]
pub struct LoginForm {
    key: String,
    next: Option<String>,
}

pub async fn login(State(ui): State<Dashboard>, headers: HeaderMap, Form(form): Form<LoginForm>) -> Response {
    let next = safe_next(form.next.as_deref()).to_owned();
    let key = form.key.trim();
    if ui.keys.verify(key).is_none() {
        let mut page =
            render(&ui, "login.html", minijinja::context! { next, error => "That is not an API key of this service." });
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        return page;
    }
    let secure = headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes() == b"https");
    let value: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
    let cookie =
        format!("{COOKIE_NAME}={value}; Path=/ui; HttpOnly; SameSite=Strict{}", if secure { "; Secure" } else { "" });
    let mut response = see_other(&next);
    response.headers_mut().insert(SET_COOKIE, HeaderValue::from_str(&cookie).expect("an encoded key is a header"));
    response
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(rename = "_csrf")]
    csrf: String,
}

pub async fn logout(session: Session, headers: HeaderMap, Form(form): Form<TokenForm>) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let mut response = see_other("/ui/login");
    let cookie = format!("{COOKIE_NAME}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0");
    response.headers_mut().insert(SET_COOKIE, HeaderValue::from_str(&cookie).expect("a static cookie"));
    response
}

/// The headers every dashboard response gets: only this origin's script and styles, no
/// framing, no caching of pages (they show live state).
pub async fn page_headers(request: Request, next: Next) -> Response {
    let asset = request.uri().path().starts_with("/ui/assets/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    if !asset {
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_back_from_its_cookie() {
        let mut headers = HeaderMap::new();
        let value: String = url::form_urlencoded::byte_serialize(b"a key; with=odd,chars").collect();
        headers.insert(COOKIE, HeaderValue::from_str(&format!("other=1; {COOKIE_NAME}={value}")).unwrap());
        assert_eq!(cookie_key(&headers).as_deref(), Some("a key; with=odd,chars"));
        assert_eq!(cookie_key(&HeaderMap::new()), None);
    }

    #[test]
    fn forms_from_other_sites_or_without_the_token_are_refused() {
        let session = Session { key: "k".into(), csrf: csrf_token("k") };
        let mut same = HeaderMap::new();
        same.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        same.insert("origin", HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(session.check_form(&same, &csrf_token("k")).is_ok());
        assert!(session.check_form(&same, &csrf_token("other")).is_err(), "another session's token");
        let mut foreign = same.clone();
        foreign.insert("origin", HeaderValue::from_static("https://evil.example"));
        assert!(session.check_form(&foreign, &csrf_token("k")).is_err());
        let mut fetch = same.clone();
        fetch.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(session.check_form(&fetch, &csrf_token("k")).is_err());
    }

    #[test]
    fn sign_in_goes_back_only_to_the_dashboard() {
        assert_eq!(safe_next(Some("/ui/jobs?status=ACTIVE")), "/ui/jobs?status=ACTIVE");
        for elsewhere in ["https://evil.example", "//evil.example", "/ui//evil.example", "/api", "/ui\\x"] {
            assert_eq!(safe_next(Some(elsewhere)), "/ui", "{elsewhere}");
        }
        assert_eq!(safe_next(None), "/ui");
    }
}
