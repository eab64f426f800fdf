//! The dashboard: pages served by `taskexec serve` itself under `/ui`, to see, follow and fix
//! jobs from a browser. Nothing runs at build time and nothing is fetched at run time: the
//! templates (minijinja, rendered on the server), the stylesheet and the one small script are
//! in the binary, and the pages work without the script (it only keeps them live).
//!
//! - [`session`]: the login form and the session (a random token in an `HttpOnly`,
//!   `SameSite=Strict` cookie, kept hashed in the database with an expiry), the CSRF token
//!   every form carries, and the headers every page is sent with (a content security policy
//!   that allows only this origin's script).
//! - [`inprocess`]: the pages read and act through the REST API, called in-process as the
//!   session's key (by its hash): one implementation of every rule, error and output shape.
//! - [`overview`]: the overview's figures, computed from the newest executions of the last
//!   hour.
//! - [`pages`]: the handlers, one per page or form; [`live`]: the server-sent events a page
//!   listens to, to refresh itself when executions change.

mod inprocess;
pub mod live;
pub mod overview;
mod pages;
pub mod session;
mod tenancy;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::api::{ApiKeys, AppState};

/// What the dashboard's handlers share.
#[derive(Clone)]
pub struct Dashboard {
    pub(crate) state: AppState,
    pub(crate) api: inprocess::InProcessApi,
    pub(crate) keys: Arc<ApiKeys>,
    pub(crate) templates: Arc<minijinja::Environment<'static>>,
    /// The fingerprint live pages follow.
    pub(crate) live: Arc<live::Feed>,
    /// The key forms' CSRF tokens are made under (derived from the secret encryption key, so
    /// every API process makes the same tokens).
    pub(crate) csrf_key: [u8; 32],
    /// How long a session lasts from signing in (`TE_UI_SESSION_TTL_SEC`).
    pub(crate) session_ttl: chrono::Duration,
}

/// The dashboard's routes, under `/ui`, reading and acting through `api` (the API's router);
/// a session lasts `session_ttl` from signing in.
pub fn router(state: AppState, api: Router, keys: Arc<ApiKeys>, session_ttl: std::time::Duration) -> Router {
    let dashboard = Dashboard {
        csrf_key: state.cipher.derive("dashboard-csrf"),
        session_ttl: chrono::Duration::from_std(session_ttl).unwrap_or(chrono::Duration::hours(12)),
        state,
        api: inprocess::InProcessApi::new(api),
        keys,
        templates: Arc::new(pages::templates()),
        live: Arc::default(),
    };
    Router::new()
        .route("/ui", get(pages::overview))
        .route("/ui/", get(pages::overview))
        .route("/ui/login", get(session::login_form).post(session::login))
        .route("/ui/logout", post(session::logout))
        .route("/ui/tenant", post(tenancy::pick))
        .route("/ui/jobs", get(pages::jobs))
        .route("/ui/jobs/{job_id}", get(pages::job))
        .route("/ui/jobs/{job_id}/{action}", post(pages::job_action))
        .route("/ui/executions/{execution_id}", get(pages::execution))
        .route("/ui/executions/{execution_id}/retry", post(pages::retry))
        .route("/ui/executions/{execution_id}/abort", post(pages::abort))
        .route("/ui/dead-letters", get(pages::dead_letters))
        .route("/ui/dead-letters/replay", post(pages::replay))
        .route("/ui/endpoints", get(pages::setup::endpoints))
        .route("/ui/endpoints/{name}/{action}", post(pages::setup::endpoint_action))
        .route("/ui/plugins", get(pages::setup::plugins))
        .route("/ui/secrets", get(pages::setup::secrets))
        .route("/ui/live", get(live::events))
        .route("/ui/assets/{file}", get(pages::asset))
        .layer(axum::middleware::from_fn(session::page_headers))
        .with_state(dashboard)
}
