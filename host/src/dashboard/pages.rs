//! One handler per page and per form. Pages read through the API in-process (see
//! `inprocess`) and render a template; forms check the session's CSRF token, act through the
//! API, and send the browser back with a notice of what happened (the API's own words when it
//! refused).

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;
use chrono::{DateTime, Utc};
use minijinja::{context, Environment, Value as Ctx};
use serde::Deserialize;
use serde_json::{json, Value};

use super::live::Version;
use super::overview::{self, SAMPLE_LIMIT, WINDOW_MINUTES};
use super::session::{see_other, Session};
use super::Dashboard;
use crate::scheduler::ticks::JobSchedule;
use crate::store::now;

const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("login.html", include_str!("templates/login.html")),
    ("overview.html", include_str!("templates/overview.html")),
    ("jobs.html", include_str!("templates/jobs.html")),
    ("job.html", include_str!("templates/job.html")),
    ("execution.html", include_str!("templates/execution.html")),
    ("dead_letters.html", include_str!("templates/dead_letters.html")),
    ("endpoints.html", include_str!("templates/endpoints.html")),
    ("plugins.html", include_str!("templates/plugins.html")),
    ("secrets.html", include_str!("templates/secrets.html")),
];

/// The templates, parsed once. HTML-escaped by their `.html` names.
pub fn templates() -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in TEMPLATES {
        env.add_template(name, source).expect("a dashboard template parses");
    }
    env.add_filter("when", when);
    env
}

/// An API timestamp as people read it: `2026-11-24 23:45:18 UTC`; "—" for none.
fn when(value: Option<String>) -> String {
    match value.as_deref().map(DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => t.with_timezone(&Utc).format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Some(Err(_)) => value.unwrap_or_default(),
        None => "—".to_owned(),
    }
}

/// `name` rendered with `context`; a template error is logged and shown as such.
pub fn render(ui: &Dashboard, name: &str, context: Ctx) -> Response {
    match ui.templates.get_template(name).and_then(|t| t.render(context)) {
        Ok(html) => Html(html).into_response(),
        Err(error) => {
            tracing::error!(template = name, error = %error, "A dashboard page could not be rendered.");
            (StatusCode::INTERNAL_SERVER_ERROR, "This page could not be rendered; the server log says why.")
                .into_response()
        }
    }
}

/// A page in the layout: the section it belongs to, the session's CSRF token, the notice a
/// form left and the version live updates follow from, beside the page's own values.
fn page(
    ui: &Dashboard,
    (session, version): (&Session, &Version),
    name: &str,
    section: &str,
    notice: Option<String>,
    values: Ctx,
) -> Response {
    let live_since = version.0.to_string();
    // An operator's session picks the tenant its pages show (`tenancy`).
    let tenants = &session.tenants;
    let tenant = session.key.tenant.as_deref().unwrap_or(crate::domain::DEFAULT_TENANT);
    render(ui, name, context! { section, csrf => session.csrf, notice, live_since, tenants, tenant, ..values })
}

/// `path?query` with `pairs` (the empty ones left out) encoded.
fn with_query(path: &str, pairs: &[(&str, Option<&str>)]) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            query.append_pair(name, value);
        }
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// A path segment from the browser, encoded for an API path.
fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[derive(Deserialize)]
pub struct Notice {
    notice: Option<String>,
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(rename = "_csrf")]
    csrf: String,
}

pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "app.css" => (include_str!("assets/app.css"), "text/css; charset=utf-8"),
        "app.js" => (include_str!("assets/app.js"), "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "No such asset.").into_response(),
    };
    ([(CONTENT_TYPE, kind), (CACHE_CONTROL, "public, max-age=300")], body).into_response()
}

pub async fn overview(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Query(notice): Query<Notice>,
) -> Response {
    let store = &ui.state.store;
    let scope = ui.scope(&session);
    let tenant = Some(scope.tenant());
    let at = now();
    let counts: BTreeMap<String, i64> = store
        .execution_counts(tenant)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(status, n)| (status.as_str().to_owned(), n))
        .collect();
    let mut samples = store
        .execution_activity(at - chrono::Duration::minutes(WINDOW_MINUTES), SAMPLE_LIMIT, tenant)
        .await
        .unwrap_or_default();
    for sample in &mut samples {
        sample.endpoint = scope.shown(&sample.endpoint);
    }
    let activity = overview::summarize(&samples, at);
    let endpoints = ui.api.get(&session.key, "/endpoints?limit=200").await.body["items"].clone();
    let by_name: HashMap<String, Value> = endpoints
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e.clone())))
        .collect();
    let idle: Vec<&Value> = endpoints
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !activity.iter().any(|row| row.endpoint.as_deref() == e["name"].as_str()))
        .collect();
    let mut upcoming = Vec::new();
    for job in store.cron_upcoming(20, tenant).await.unwrap_or_default() {
        let Some(next) = job.cron_next_run_at else { continue };
        upcoming.push(json!({
            "job_id": job.job_id.to_string(),
            "endpoint": scope.shown(&job.endpoint),
            "schedule": job.cron_expression.clone().or(job.schedule_plugin.clone().map(|p| format!("plugin {p}"))),
            "next_utc": next.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            "next_local": local(next, job.cron_timezone.as_deref()),
        }));
    }
    page(
        &ui,
        (&session, &version),
        "overview.html",
        "overview",
        notice.notice,
        context! {
            counts,
            activity,
            endpoints => by_name,
            idle,
            sampled => samples.len() as i64 == SAMPLE_LIMIT,
            sample_count => samples.len(),
            upcoming,
        },
    )
}

/// `t` in the job's timezone (`2026-11-25 09:00:00 CET`).
fn local(t: DateTime<Utc>, zone: Option<&str>) -> String {
    match zone.and_then(|z| z.parse::<chrono_tz::Tz>().ok()) {
        Some(tz) => t.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S %Z").to_string(),
        None => t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    }
}

#[derive(Deserialize)]
pub struct JobsQuery {
    endpoint: Option<String>,
    trigger: Option<String>,
    status: Option<String>,
    cursor: Option<String>,
    notice: Option<String>,
}

pub async fn jobs(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Query(q): Query<JobsQuery>,
) -> Response {
    let filters =
        [("endpoint", q.endpoint.as_deref()), ("trigger", q.trigger.as_deref()), ("status", q.status.as_deref())];
    let mut pairs = filters.to_vec();
    pairs.extend([("order", Some("newest")), ("limit", Some("50")), ("cursor", q.cursor.as_deref())]);
    let answer = ui.api.get(&session.key, &with_query("/jobs", &pairs)).await;
    let error = (!answer.ok()).then(|| answer.message());
    // Each job's newest execution: one indexed read each, for a page of at most 50, from the
    // store (through the API they would count against the key's rate limit at every refresh).
    let mut jobs = answer.body["items"].clone();
    for job in jobs.as_array_mut().into_iter().flatten() {
        let Some(id) = job["job_id"].as_str() else { continue };
        if let Ok(Some(newest)) = ui.state.store.execution_last(&id.into()).await {
            job["latest"] =
                serde_json::to_value(crate::api::executions::ExecutionOut::from(newest)).unwrap_or_default();
        }
    }
    let next = answer.body["cursor"].as_str().map(|cursor| {
        let mut pairs = filters.to_vec();
        pairs.push(("cursor", Some(cursor)));
        with_query("/ui/jobs", &pairs)
    });
    let endpoints = ui.api.get(&session.key, "/endpoints?limit=200").await.body["items"].clone();
    page(
        &ui,
        (&session, &version),
        "jobs.html",
        "jobs",
        q.notice,
        context! {
            jobs,
            error,
            next,
            endpoint => q.endpoint, trigger => q.trigger, status => q.status,
            endpoints,
        },
    )
}

pub async fn job(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Path(job_id): Path<String>,
    Query(notice): Query<Notice>,
) -> Response {
    let id = segment(&job_id);
    let answer = ui.api.get(&session.key, &format!("/jobs/{id}")).await;
    if !answer.ok() {
        return not_found(&ui, (&session, &version), "jobs", &answer.message());
    }
    let versions = ui.api.get(&session.key, &format!("/jobs/{id}/versions?limit=20")).await.body["items"].clone();
    let executions =
        ui.api.get(&session.key, &format!("/jobs/{id}/executions?order=newest&limit=50")).await.body["items"].clone();
    let status = ui.api.get(&session.key, &format!("/jobs/{id}/status")).await.body;
    let schedule = schedule_view(&ui, &job_id.as_str().into()).await;
    // Cancel does something for a cron job, or a job with an execution still to finish.
    let unfinished = ["PENDING", "QUEUED", "RUNNING", "RETRYING"];
    let cancellable = answer.body["trigger"] == "CRON"
        || executions
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| unfinished.contains(&e["status"].as_str().unwrap_or("")));
    page(
        &ui,
        (&session, &version),
        "job.html",
        "jobs",
        notice.notice,
        context! { job => answer.body, versions, executions, status, schedule, cancellable },
    )
}

/// A CRON job's schedule for people: the expression in words and its next five ticks in the
/// job's timezone.
async fn schedule_view(ui: &Dashboard, job_id: &crate::ids::JobId) -> Option<Value> {
    let job = ui.state.store.job_get(job_id).await.ok()??;
    if job.trigger_type != crate::domain::Trigger::Cron {
        return None;
    }
    let words = job.cron_expression.as_deref().and_then(|e| cronspeak::describe(e).ok());
    let mut ticks = Vec::new();
    let mut error = None;
    if job.paused_at.is_none() && job.status == crate::domain::JobStatus::Active {
        match JobSchedule::of(&job, &ui.state.plugins).await {
            Ok(schedule) => {
                let next = schedule.next_after(now()).await;
                let listed = match next {
                    Ok(Some(first)) => {
                        schedule.upcoming(first, job.cron_ends_at, 5, std::time::Duration::from_secs(2)).await
                    }
                    Ok(None) => Ok((Vec::new(), false)),
                    Err(e) => Err(e),
                };
                match listed {
                    Ok((next, _)) => ticks = next.into_iter().map(|t| local(t, job.cron_timezone.as_deref())).collect(),
                    Err(e) => error = Some(e.0),
                }
            }
            Err(e) => error = Some(e.0),
        }
    }
    Some(json!({
        "expression": job.cron_expression,
        "plugin": job.schedule_plugin,
        "words": words,
        "timezone": job.cron_timezone.unwrap_or_else(|| "UTC".into()),
        "ticks": ticks,
        "error": error,
        "paused": job.paused_at.is_some(),
    }))
}

fn not_found(ui: &Dashboard, seen: (&Session, &Version), section: &str, message: &str) -> Response {
    let mut response = page(ui, seen, "overview.html", section, Some(message.to_owned()), context! { missing => true });
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// The page a form sends the browser back to, with `notice`.
fn back(path: &str, notice: &str) -> Response {
    see_other(&with_query(path, &[("notice", Some(notice))]))
}

/// A button's action: `POST api_path` as the session's key, then back to `to` with `done`, or
/// with the API's own words when it refused.
async fn act(ui: &Dashboard, session: &Session, api_path: &str, done: &str, to: &str) -> Response {
    let answer = ui.api.post(&session.key, api_path, None).await;
    back(to, &if answer.ok() { done.to_owned() } else { answer.message() })
}

pub async fn job_action(
    session: Session,
    State(ui): State<Dashboard>,
    headers: HeaderMap,
    Path((job_id, action)): Path<(String, String)>,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let done = match action.as_str() {
        "pause" => "Paused: no ticks until resumed.",
        "resume" => "Resumed: the schedule carries on from the next tick.",
        "cancel" => "Cancelled: its waiting executions are withdrawn.",
        "trigger" => "Fired now: one execution outside the schedule.",
        _ => return (StatusCode::NOT_FOUND, "No such action.").into_response(),
    };
    let id = segment(&job_id);
    act(&ui, &session, &format!("/jobs/{id}/{action}"), done, &format!("/ui/jobs/{id}")).await
}

pub async fn execution(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Path(execution_id): Path<String>,
    Query(notice): Query<Notice>,
) -> Response {
    let id = segment(&execution_id);
    let answer = ui.api.get(&session.key, &format!("/executions/{id}")).await;
    if !answer.ok() {
        return not_found(&ui, (&session, &version), "dead-letters", &answer.message());
    }
    let attempts =
        ui.api.get(&session.key, &format!("/executions/{id}/attempts?limit=200")).await.body["items"].clone();
    let logs = ui.api.get(&session.key, &format!("/executions/{id}/logs?limit=200")).await.body["items"].clone();
    let timeline = timeline(&attempts);
    page(
        &ui,
        (&session, &version),
        "execution.html",
        "dead-letters",
        notice.notice,
        context! { execution => answer.body, attempts, logs, timeline },
    )
}

/// The attempts as bars on one time axis (SVG units: 300 across), so retries' spacing and
/// durations show at a glance.
fn timeline(attempts: &Value) -> Vec<Value> {
    let parse =
        |v: &Value| v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc));
    let spans: Vec<(DateTime<Utc>, DateTime<Utc>, String)> = attempts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let start = parse(&a["started_at"])?;
            let end = parse(&a["completed_at"]).unwrap_or_else(now).max(start);
            Some((start, end, a["status"].as_str().unwrap_or_default().to_owned()))
        })
        .collect();
    let (Some(first), Some(last)) = (spans.iter().map(|s| s.0).min(), spans.iter().map(|s| s.1).max()) else {
        return Vec::new();
    };
    let total = (last - first).num_milliseconds().max(1) as f64;
    spans
        .iter()
        .map(|(start, end, status)| {
            let x = (*start - first).num_milliseconds() as f64 / total * 296.0;
            let width = ((*end - *start).num_milliseconds() as f64 / total * 296.0).max(2.0);
            json!({"x": (x * 10.0).round() / 10.0, "width": (width * 10.0).round() / 10.0, "status": status})
        })
        .collect()
}

/// The execution page's Abort: `cancel?running=abort` of the execution in flight.
pub async fn abort(
    session: Session,
    State(ui): State<Dashboard>,
    headers: HeaderMap,
    Path(execution_id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let id = segment(&execution_id);
    let answer = ui.api.post(&session.key, &format!("/executions/{id}/cancel?running=abort"), None).await;
    let said = match answer.body["status"].as_str().filter(|_| answer.ok()) {
        Some("CANCELLED") => "Aborted: its delivery was stopped, and it will not be retried.".to_owned(),
        Some(_) => "Its worker is asked to abort it; this page shows when it has.".to_owned(),
        None => answer.message(),
    };
    back(&format!("/ui/executions/{id}"), &said)
}

pub async fn retry(
    session: Session,
    State(ui): State<Dashboard>,
    headers: HeaderMap,
    Path(execution_id): Path<String>,
    Form(form): Form<TokenForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let answer = ui.api.post(&session.key, &format!("/executions/{}/retry", segment(&execution_id)), None).await;
    match answer.body["execution_id"].as_str().filter(|_| answer.ok()) {
        Some(retry) => back(
            &format!("/ui/executions/{}", segment(retry)),
            &format!("Retrying {execution_id}: this is its retry, queued."),
        ),
        None => back(&format!("/ui/executions/{}", segment(&execution_id)), &answer.message()),
    }
}

#[derive(Deserialize)]
pub struct DeadLetterQuery {
    endpoint: Option<String>,
    job_id: Option<String>,
    /// `YYYY-MM-DD` (a date input), from the start of that day UTC.
    since: Option<String>,
    cursor: Option<String>,
    notice: Option<String>,
}

/// A date input's `YYYY-MM-DD` as the API's RFC 3339 time, or why not.
fn since_param(since: Option<&str>) -> Result<Option<String>, String> {
    match since.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(day) => chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map(|d| Some(format!("{d}T00:00:00Z")))
            .map_err(|_| format!("`since` must be a date (YYYY-MM-DD), got `{day}`")),
    }
}

pub async fn dead_letters(
    session: Session,
    version: Version,
    State(ui): State<Dashboard>,
    Query(q): Query<DeadLetterQuery>,
) -> Response {
    let since = since_param(q.since.as_deref());
    let (failures, next, error) = match &since {
        Err(why) => (Value::Null, None, Some(why.clone())),
        Ok(created_after) => {
            let filters = [
                ("endpoint", q.endpoint.as_deref()),
                ("job_id", q.job_id.as_deref()),
                ("created_after", created_after.as_deref()),
            ];
            let mut pairs = filters.to_vec();
            pairs.extend([
                ("status", Some("FAILED")),
                ("order", Some("newest")),
                ("limit", Some("50")),
                ("cursor", q.cursor.as_deref()),
            ]);
            let answer = ui.api.get(&session.key, &with_query("/executions", &pairs)).await;
            let next = answer.body["cursor"].as_str().map(|cursor| {
                with_query(
                    "/ui/dead-letters",
                    &[
                        ("endpoint", q.endpoint.as_deref()),
                        ("job_id", q.job_id.as_deref()),
                        ("since", q.since.as_deref()),
                        ("cursor", Some(cursor)),
                    ],
                )
            });
            let error = (!answer.ok()).then(|| answer.message());
            (answer.body["items"].clone(), next, error)
        }
    };
    page(
        &ui,
        (&session, &version),
        "dead_letters.html",
        "dead-letters",
        q.notice,
        context! { failures, next, error, endpoint => q.endpoint, job_id => q.job_id, since => q.since },
    )
}

#[derive(Deserialize)]
pub struct ReplayForm {
    #[serde(rename = "_csrf")]
    csrf: String,
    endpoint: Option<String>,
    job_id: Option<String>,
    since: Option<String>,
    limit: Option<String>,
}

pub async fn replay(
    session: Session,
    State(ui): State<Dashboard>,
    headers: HeaderMap,
    Form(form): Form<ReplayForm>,
) -> Response {
    if let Err(refused) = session.check_form(&headers, &form.csrf) {
        return refused.into_response();
    }
    let filters =
        [("endpoint", form.endpoint.as_deref()), ("job_id", form.job_id.as_deref()), ("since", form.since.as_deref())];
    let here = with_query("/ui/dead-letters", &filters);
    let created_after = match since_param(form.since.as_deref()) {
        Ok(created_after) => created_after,
        Err(why) => return back(&here, &why),
    };
    let limit = match form.limit.as_deref().filter(|l| !l.is_empty()).map(str::parse::<u32>) {
        None => 100,
        Some(Ok(n)) => n,
        Some(Err(_)) => return back(&here, "`limit` must be a whole number (1–1000)."),
    };
    let mut body = json!({"status": "FAILED", "limit": limit});
    for (field, value) in [("endpoint", &form.endpoint), ("job_id", &form.job_id), ("created_after", &created_after)] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            body[field] = json!(value);
        }
    }
    let answer = ui.api.post(&session.key, "/executions/replay", Some(body)).await;
    let notice = match answer.body["queued"].as_u64().filter(|_| answer.ok()) {
        Some(0) => "Nothing to replay: every matching failure has been retried already.".to_owned(),
        Some(1) => "Queued 1 retry of the matching failures.".to_owned(),
        Some(n) => format!("Queued {n} retries of the matching failures, oldest first."),
        None => answer.message(),
    };
    // Retried failures stay listed (each is the record of its attempt); their retries run.
    let mut pairs = filters.to_vec();
    pairs.push(("notice", Some(&notice)));
    see_other(&with_query("/ui/dead-letters", &pairs))
}

pub mod setup;

#[cfg(test)]
mod tests;
