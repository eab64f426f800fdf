//! `GET /ui/live?since=VERSION`: server-sent `change` events for the page a browser shows, so
//! it refreshes itself (the page's script fetches it again and swaps its main part) as
//! executions and jobs change.
//!
//! Each stream reads a fingerprint of the service every second — the unfinished executions
//! counted by status (partial indexes), the newest execution and its status, the newest job —
//! and sends an event when it differs from the last one it saw. A page carries the fingerprint
//! it was rendered at (`since`), so a change made before its script connects is not missed.
//! The fingerprint is a hash with fixed keys, the same in every process of one build, so a
//! page rendered by one API process may follow changes from another. Cheap and approximate on
//! purpose: a page that refreshes once too often costs a page load.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};

use super::session::Session;
use super::Dashboard;
use crate::store::{now, JobFilter, PageRequest};

const INTERVAL: Duration = Duration::from_secs(1);

/// What a page shows changes when this does; None when the store did not answer.
async fn fingerprint(ui: &Dashboard) -> Option<u64> {
    let store = &ui.state.store;
    let counts = store.execution_counts().await.ok()?;
    let newest = store.execution_activity(now() - chrono::Duration::days(1), 1).await.ok()?;
    let newest_job =
        store.job_list(&JobFilter::default(), &PageRequest { after: None, limit: 1, newest_first: true }).await.ok()?;
    let newest = newest.first().map(|e| (e.created_at, e.status, e.completed_at));
    let seen = format!("{counts:?}|{newest:?}|{:?}", newest_job.first().map(|j| (&j.job_id, j.status, j.paused_at)));
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&seen, &mut hasher);
    Some(std::hash::Hasher::finish(&hasher))
}

/// The version a page shows: the fingerprint read as its request starts, before the page
/// reads anything, so a change made while it renders, or before its script connects, is sent
/// to it at once (0 when the store did not answer: the first event then refreshes it).
pub struct Version(pub u64);

impl axum::extract::FromRequestParts<Dashboard> for Version {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(_: &mut axum::http::request::Parts, ui: &Dashboard) -> Result<Self, Self::Rejection> {
        Ok(Self(fingerprint(ui).await.unwrap_or(0)))
    }
}

#[derive(serde::Deserialize)]
pub struct Since {
    since: Option<u64>,
}

pub async fn events(
    _session: Session,
    State(ui): State<Dashboard>,
    Query(since): Query<Since>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // From the page's own version when it gives one, so what changed since it was rendered
    // is sent at once.
    let first = match since.since {
        Some(version) => Some(version),
        None => fingerprint(&ui).await,
    };
    let changes = stream::unfold((ui, first), |(ui, mut last)| async move {
        loop {
            tokio::time::sleep(INTERVAL).await;
            let Some(seen) = fingerprint(&ui).await else { continue };
            if last.as_ref() != Some(&seen) {
                last = Some(seen);
                return Some((Ok(Event::default().event("change").data("changed")), (ui, last)));
            }
        }
    });
    Sse::new(changes).keep_alive(KeepAlive::default())
}
