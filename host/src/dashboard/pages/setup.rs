//! The setup pages: endpoints (with their Pause, Resume and Enable buttons), plugins and
//! secrets' names.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use minijinja::context;
use serde_json::{json, Value};

use super::{act, page, segment, Notice, TokenForm};
use crate::dashboard::live::Version;
use crate::dashboard::session::Session;
use crate::dashboard::Dashboard;

pub async fn endpoints(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Query(notice): Query<Notice>,
) -> Response {
    let answer = ui.api.get(&session.key, "/endpoints?limit=200").await;
    page(
        &ui,
        (&session, &version),
        "endpoints.html",
        "endpoints",
        notice.notice,
        context! { endpoints => answer.body["items"].clone() },
    )
}

/// The endpoint's Pause, Resume and Enable buttons.
pub async fn endpoint_action(
    session: Session,
    State(ui): State<Dashboard>,
    headers: HeaderMap,
    Path((name, action)): Path<(String, String)>,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let done = match action.as_str() {
        "pause" => format!("Paused {name}: its executions wait until it is resumed."),
        "resume" => format!("Resumed {name}: its waiting executions are delivered."),
        "enable" => format!("Enabled {name}: its circuit is closed."),
        _ => return (StatusCode::NOT_FOUND, "No such action.").into_response(),
    };
    act(&ui, &session, &format!("/endpoints/{}/{action}", segment(&name)), &done, "/ui/endpoints").await
}

pub async fn plugins(session: Session, version: Version, State(ui): State<Dashboard>) -> Response {
    let listed = ui.api.get(&session.key, "/plugins?limit=200").await.body["items"].clone();
    let endpoints = ui.api.get(&session.key, "/endpoints?limit=200").await.body["items"].clone();
    let mut plugins = Vec::new();
    for plugin in listed.as_array().into_iter().flatten() {
        let Some(name) = plugin["name"].as_str() else { continue };
        let detail = ui.api.get(&session.key, &format!("/plugins/{}", segment(name))).await.body;
        // Which endpoints run which version: pinned (`name@3`) or the newest.
        let users: Vec<Value> = endpoints
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let uses = [&e["plugin"], &e["renderer"], &e["classifier"]["plugin"]].into_iter().find_map(|r| {
                    let r = r.as_str()?;
                    let (plugin, version) = r.split_once('@').map_or((r, None), |(p, v)| (p, Some(v)));
                    (plugin == name).then(|| version.map_or_else(|| "newest".to_owned(), |v| format!("version {v}")))
                })?;
                Some(json!({"endpoint": e["name"], "uses": uses}))
            })
            .collect();
        plugins.push(json!({"plugin": detail, "users": users}));
    }
    page(&ui, (&session, &version), "plugins.html", "plugins", None, context! { plugins })
}

pub async fn secrets(session: Session, version: Version, State(ui): State<Dashboard>) -> Response {
    let answer = ui.api.get(&session.key, "/secrets?limit=200").await;
    page(
        &ui,
        (&session, &version),
        "secrets.html",
        "secrets",
        None,
        context! { secrets => answer.body["items"].clone() },
    )
}
