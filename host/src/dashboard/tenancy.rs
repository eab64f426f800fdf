//! Which tenant a session's pages show. A tenant's key sees its own tenant alone; an operator's
//! session picks one (a form in every page's header, kept in the `te_ui_tenant` cookie) and
//! the dashboard's in-process API calls then act within it (the `taskexec-tenant` header), as
//! an operator's own requests may.

use axum::http::header::{COOKIE, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;

use super::session::{see_other, Session};
use super::Dashboard;
use crate::api::auth::{Caller, KeyHash};
use crate::domain::{Scope, DEFAULT_TENANT};
use crate::store::PageRequest;

const TENANT_COOKIE: &str = "te_ui_tenant";

/// The most tenants the picker lists.
const PICKER_TENANTS: i64 = 200;

/// Who the dashboard's in-process API calls act as: the session's key, by its hash, and the
/// tenant an operator's session picked.
#[derive(Debug, Clone)]
pub struct ApiAs {
    pub hash: KeyHash,
    pub tenant: Option<String>,
}

/// The tenant named in the request's picker cookie.
fn picked(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(TENANT_COOKIE)?.strip_prefix('=').map(str::to_owned))
        .filter(|tenant| !tenant.is_empty())
}

/// For a session of `hash`: whom its API calls act as, and the tenants its picker lists
/// (none but for an operator's session). A picked tenant that no longer exists is dropped.
pub async fn acting(ui: &Dashboard, hash: KeyHash, headers: &HeaderMap) -> (ApiAs, Vec<String>) {
    if ui.keys.caller(&hash) != Some(Caller::Operator) {
        return (ApiAs { hash, tenant: None }, Vec::new());
    }
    let page = PageRequest { after: None, limit: PICKER_TENANTS, newest_first: false };
    let tenants: Vec<String> =
        ui.state.store.tenant_list(&page).await.unwrap_or_default().into_iter().map(|t| t.name).collect();
    let tenant = picked(headers).filter(|t| t != DEFAULT_TENANT && tenants.contains(t));
    (ApiAs { hash, tenant }, tenants)
}

impl Dashboard {
    /// The tenant a session's pages show: its key's, or the one an operator's session picked
    /// (`default` until it picks), as the API scopes the same calls.
    pub(crate) fn scope(&self, session: &Session) -> Scope {
        match (self.keys.caller(&session.key.hash), &session.key.tenant) {
            (Some(Caller::Tenant(key)), _) => Scope::new(&key.tenant),
            (_, Some(tenant)) => Scope::new(tenant),
            _ => Scope::default(),
        }
    }
}

#[derive(Deserialize)]
pub struct PickForm {
    #[serde(rename = "_csrf")]
    csrf: String,
    tenant: String,
}

/// `POST /ui/tenant`: an operator's session picks the tenant its pages show.
pub async fn pick(session: Session, headers: HeaderMap, Form(form): Form<PickForm>) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    // Only a tenant the picker listed; anything else (or `default`) picks none.
    let tenant = Some(form.tenant).filter(|t| t != DEFAULT_TENANT && session.tenants.contains(t));
    let cookie = match &tenant {
        Some(tenant) => format!("{TENANT_COOKIE}={tenant}; Path=/ui; HttpOnly; SameSite=Strict"),
        None => format!("{TENANT_COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    };
    let mut response = see_other("/ui");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}
