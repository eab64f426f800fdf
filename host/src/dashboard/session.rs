//! Who is looking: the login form, the session, and the CSRF token.
//!
//! Signing in checks an API key as the API does, then makes a session: a random 256-bit token
//! in the `te_ui` cookie (`HttpOnly`, `SameSite=Strict`, scoped to `/ui`, `Secure` behind a TLS
//! proxy that says so with `X-Forwarded-Proto: https`, and `Max-Age` of the session's life,
//! `TE_UI_SESSION_TTL_SEC`). The database keeps the token's SHA-256, the hash of the key that
//! signed in and when the session ends, so every API process knows the session, and neither
//! the cookie nor the database holds the key. Each request looks the session up: signing out
//! deletes it, an expired one is refused, and one whose key is no longer accepted (removed from
//! `TE_API_KEYS`) is refused too. The dashboard acts through the API in-process with the key's
//! hash, never the key. Every form carries a token that is an HMAC of the session token under
//! a key derived from the secret encryption key; a form posted from another site (by
//! `Sec-Fetch-Site` or `Origin`) is refused, the sign-in form included.

use axum::extract::{FromRequestParts, Query, Request, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use axum::http::{request::Parts, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Form;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::pages::render;
use super::tenancy::{acting, ApiAs};
use super::Dashboard;
use crate::api::auth::KeyHash;
use crate::api::server::ClientAddr;

const COOKIE_NAME: &str = "te_ui";

/// A signed-in browser: whom its API calls act as (the hash of the key it signed in with, and
/// the tenant an operator's session picked), the tenants its picker lists, and the token its
/// forms carry.
pub struct Session {
    pub key: ApiAs,
    pub tenants: Vec<String>,
    token_hash: [u8; 32],
    pub csrf: String,
}

/// Whether a request says it comes from a page of another site.
fn cross_site(headers: &HeaderMap) -> bool {
    headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes() == b"cross-site")
        || match (headers.get("origin"), headers.get("host")) {
            (Some(origin), Some(host)) => {
                let origin = origin.to_str().unwrap_or_default();
                let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
                origin != "null" && origin_host.as_bytes() != host.as_bytes()
            }
            _ => false,
        }
}

impl Session {
    /// Refuse a form posted without the token the signed-in pages carry, or from another site.
    pub fn check_form(&self, headers: &HeaderMap, token: &str) -> Result<(), StaleForm> {
        if cross_site(headers) || !bool::from(self.csrf.as_bytes().ct_eq(token.as_bytes())) {
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

/// The CSRF token of the session whose token hashes to `token_hash`: an HMAC under the
/// dashboard's key, so it can only be made by the server and says nothing of the session.
fn csrf_token(csrf_key: &[u8; 32], token_hash: &[u8; 32]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(csrf_key).expect("HMAC takes a key of any length");
    mac.update(token_hash);
    mac.finalize().into_bytes().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The session token in the request's cookie.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE_NAME)?.strip_prefix('=').map(str::to_owned))
        .filter(|token| !token.is_empty())
}

fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl FromRequestParts<Dashboard> for Session {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, ui: &Dashboard) -> Result<Self, Response> {
        let hash = cookie_token(&parts.headers).map(|token| token_hash(&token));
        let key = match hash {
            Some(hash) => match ui.state.store.dashboard_session_key(&hash).await {
                Ok(key) => key.and_then(|k| KeyHash::try_from(k).ok()).filter(|k| ui.keys.knows(k)),
                Err(error) => {
                    tracing::warn!(%error, "Could not read a dashboard session.");
                    return Err(
                        (StatusCode::SERVICE_UNAVAILABLE, "The database is unreachable; try again.").into_response()
                    );
                }
            },
            None => None,
        };
        match (hash, key) {
            (Some(token_hash), Some(key)) => {
                let (key, tenants) = acting(ui, key, &parts.headers).await;
                Ok(Self { key, tenants, token_hash, csrf: csrf_token(&ui.csrf_key, &token_hash) })
            }
            _ if parts.uri.path() == "/ui/live" => Err(StatusCode::UNAUTHORIZED.into_response()),
            _ => {
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

pub async fn login(
    State(ui): State<Dashboard>,
    client: Option<axum::Extension<ClientAddr>>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) if crate::api::server::is_deadline(&rejection) => {
            return (StatusCode::REQUEST_TIMEOUT, "REQUEST_TIMEOUT: the form did not arrive in time.").into_response()
        }
        Err(rejection) => return rejection.into_response(),
    };
    if cross_site(&headers) {
        return StaleForm.into_response();
    }
    let client = client.map(|c| c.0 .0);
    if let Some(wait) = client.and_then(|address| ui.keys.throttle.blocked(address)) {
        return crate::api::auth::too_many_failures(wait);
    }
    let next = safe_next(form.next.as_deref()).to_owned();
    let Some((key, _)) = ui.keys.verify(form.key.trim()) else {
        if let Some(address) = client {
            ui.keys.throttle.failed(address);
        }
        let mut page =
            render(&ui, "login.html", minijinja::context! { next, error => "That is not an API key of this service." });
        *page.status_mut() = StatusCode::UNAUTHORIZED;
        return page;
    };
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let token = URL_SAFE_NO_PAD.encode(bytes);
    let expires_at = chrono::Utc::now() + ui.session_ttl;
    if let Err(error) = ui.state.store.dashboard_session_insert(&token_hash(&token), &key, expires_at).await {
        tracing::warn!(%error, "Could not store a dashboard session.");
        return (StatusCode::SERVICE_UNAVAILABLE, "The database is unreachable; try again.").into_response();
    }
    let secure = headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes() == b"https");
    let cookie = format!(
        "{COOKIE_NAME}={token}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}{}",
        ui.session_ttl.num_seconds(),
        if secure { "; Secure" } else { "" }
    );
    let mut response = see_other(&next);
    response.headers_mut().insert(SET_COOKIE, HeaderValue::from_str(&cookie).expect("a token is a header"));
    response
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(rename = "_csrf")]
    csrf: String,
}

pub async fn logout(
    State(ui): State<Dashboard>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    if let Err(error) = ui.state.store.dashboard_session_delete(&session.token_hash).await {
        tracing::warn!(%error, "Could not end a dashboard session.");
        return (StatusCode::SERVICE_UNAVAILABLE, "The database is unreachable; try again.").into_response();
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
    fn the_token_is_read_back_from_its_cookie() {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_static("other=1; te_ui=abc-DEF_0"));
        assert_eq!(cookie_token(&headers).as_deref(), Some("abc-DEF_0"));
        assert_eq!(cookie_token(&HeaderMap::new()), None);
        headers.insert(COOKIE, HeaderValue::from_static("te_ui="));
        assert_eq!(cookie_token(&headers), None, "a cleared cookie is no session");
    }

    #[test]
    fn forms_from_other_sites_or_without_the_token_are_refused() {
        let key = [7u8; 32];
        let (mine, other) = (token_hash("mine"), token_hash("other"));
        let key_as = ApiAs { hash: [1u8; 32], tenant: None };
        let session = Session { key: key_as, tenants: Vec::new(), token_hash: mine, csrf: csrf_token(&key, &mine) };
        let mut same = HeaderMap::new();
        same.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        same.insert("origin", HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(session.check_form(&same, &csrf_token(&key, &mine)).is_ok());
        assert!(session.check_form(&same, &csrf_token(&key, &other)).is_err(), "another session's token");
        assert!(session.check_form(&same, &csrf_token(&[8u8; 32], &mine)).is_err(), "another server's key");
        let mut foreign = same.clone();
        foreign.insert("origin", HeaderValue::from_static("https://evil.example"));
        assert!(session.check_form(&foreign, &csrf_token(&key, &mine)).is_err());
        let mut fetch = same.clone();
        fetch.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(session.check_form(&fetch, &csrf_token(&key, &mine)).is_err());
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
