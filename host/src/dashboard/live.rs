//! `GET /ui/live?since=VERSION`: server-sent `change` events for the page a browser shows, so
//! it refreshes itself (the page's script fetches it again and swaps its main part) as
//! executions and jobs change.
//!
//! One task per process reads a fingerprint of the service every second — the unfinished
//! executions counted by status (partial indexes), the newest execution and its status, the
//! newest job — while at least one page listens (the [`Feed`]), and every stream sends an
//! event when it differs from the last one that stream saw: three reads a second however many
//! pages are open, none when none is. A page carries the fingerprint
//! it was rendered at (`since`), so a change made before its script connects is not missed.
//! The fingerprint is a hash with fixed keys, the same in every process of one build, so a
//! page rendered by one API process may follow changes from another. Cheap and approximate on
//! purpose: a page that refreshes once too often costs a page load.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use tokio::sync::watch;

use super::session::Session;
use super::Dashboard;
use crate::store::{now, JobFilter, PageRequest};

const INTERVAL: Duration = Duration::from_secs(1);

/// What a page shows changes when this does; None when the store did not answer.
async fn fingerprint(ui: &Dashboard) -> Option<u64> {
    let store = &ui.state.store;
    // Of every tenant: one fingerprint serves every page, and says no more than "something
    // changed" (a page reloads and reads only its own tenant's).
    let counts = store.execution_counts(None).await.ok()?;
    let newest = store.execution_activity(now() - chrono::Duration::days(1), 1, None).await.ok()?;
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

/// The process's fingerprint, read once a second by one task while anyone listens.
pub struct Feed {
    latest: watch::Sender<Option<u64>>,
    reading: AtomicBool,
}

impl Default for Feed {
    fn default() -> Self {
        Self { latest: watch::channel(None).0, reading: AtomicBool::new(false) }
    }
}

impl Feed {
    /// Follow the fingerprint, starting the reading task if it is not running.
    fn subscribe(ui: &Dashboard) -> watch::Receiver<Option<u64>> {
        let feed = ui.live.clone();
        let listening = feed.latest.subscribe();
        if !feed.reading.swap(true, Ordering::AcqRel) {
            let ui = ui.clone();
            tokio::spawn(async move {
                loop {
                    if feed.latest.receiver_count() == 0 {
                        feed.reading.store(false, Ordering::Release);
                        // A page that subscribed just now, after the count was read, found the
                        // task still running: go on for it unless another task took over.
                        if feed.latest.receiver_count() == 0 || feed.reading.swap(true, Ordering::AcqRel) {
                            // What it read last is stale by the time anyone listens again.
                            feed.latest.send_replace(None);
                            return;
                        }
                    }
                    if let Some(seen) = fingerprint(&ui).await {
                        feed.latest.send_if_modified(|latest| latest.replace(seen) != Some(seen));
                    }
                    tokio::time::sleep(INTERVAL).await;
                }
            });
        }
        listening
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
    let mut feed = Feed::subscribe(&ui);
    feed.mark_changed();
    let changes = stream::unfold((feed, first), |(mut feed, mut last)| async move {
        loop {
            // Ends with the feed's task (never, while this stream holds a receiver).
            feed.changed().await.ok()?;
            let Some(seen) = *feed.borrow_and_update() else { continue };
            if last != Some(seen) {
                last = Some(seen);
                return Some((Ok(Event::default().event("change").data("changed")), (feed, last)));
            }
        }
    });
    Sse::new(changes).keep_alive(KeepAlive::default())
}
