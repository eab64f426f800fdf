//! The completer: writes finished attempts in batches, and does not lose them.
//!
//! Every pipeline hands its attempt's outcome here and waits for the answer. The completer
//! takes whatever has queued up (up to `BATCH`) and writes it in one transaction, so under
//! load a hundred executions cost one commit instead of a hundred; when idle, a batch is the
//! one outcome that arrived, written at once — no timer adds latency.
//!
//! A result the receiver already has must reach the database, so a failed write is not the
//! end of it:
//! - every outcome is made storable first (`AttemptFinish::make_storable`: no NUL, sizes
//!   capped);
//! - a write that fails because the database is unreachable, restarting or busy is retried
//!   with backoff until it answers (bounded only at shutdown, when the lease of what is left
//!   expires and the reclaimer retries it);
//! - a batch refused for its data is split in halves until the refused outcome is alone, so
//!   one bad row never fails its batch-mates; that outcome is then written without its
//!   payload (status and timing kept, `RESULT_UNSTORABLE` as the error), so its execution
//!   still leaves RUNNING.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::store::{AttemptFinish, Backend, Store, StoreError, StoreResult};

/// The most outcomes one transaction writes.
const BATCH: usize = 128;
/// Batches written at once on PostgreSQL.
const POSTGRES_WRITERS: usize = 2;
/// Backoff between retries of a write the database could not take.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(5);

type Request = (AttemptFinish, oneshot::Sender<StoreResult<bool>>);

pub struct Completer {
    requests: mpsc::Sender<Request>,
    writers: JoinSet<()>,
    /// Cancelled when shutdown stops waiting: retries end, and what is unwritten is left to
    /// lease expiry and the reclaimer.
    abandon: CancellationToken,
}

impl Completer {
    /// `writers` batches may be written at once. PostgreSQL takes several transactions side by
    /// side and a batch spends most of its time in round trips and the commit; SQLite has one
    /// write lock, so one writer there.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let writers = match store.backend() {
            Backend::Postgres => POSTGRES_WRITERS,
            Backend::Sqlite => 1,
        };
        let (requests, incoming) = mpsc::channel::<Request>(4 * BATCH);
        let incoming = Arc::new(Mutex::new(incoming));
        let abandon = CancellationToken::new();
        let mut set = JoinSet::new();
        for _ in 0..writers {
            let writer = Writer { store: store.clone(), abandon: abandon.clone() };
            let incoming = incoming.clone();
            set.spawn(async move {
                while let Some(batch) = next_batch(&incoming).await {
                    let (mut finishes, replies): (Vec<AttemptFinish>, Vec<_>) = batch.into_iter().unzip();
                    finishes.iter_mut().for_each(AttemptFinish::make_storable);
                    let results = writer.write(&finishes).await;
                    for (reply, result) in replies.into_iter().zip(results) {
                        let _ = reply.send(result);
                    }
                }
            });
        }
        Self { requests, writers: set, abandon }
    }

    /// Queue one attempt's outcome, waiting while the queue is full; the future returned says
    /// whether it was written (false: fenced out).
    pub async fn submit(&self, finish: AttemptFinish) -> impl Future<Output = StoreResult<bool>> + use<> {
        let (reply, answer) = oneshot::channel();
        let queued = self.requests.send((finish, reply)).await.is_ok();
        async move {
            if !queued {
                return Err(StoreError::Closed);
            }
            answer.await.unwrap_or(Err(StoreError::Closed))
        }
    }

    /// Stop taking outcomes and wait until those queued are written, for at most `within`
    /// (the database may be down); then stop retrying.
    pub async fn close(self, within: Duration) {
        drop(self.requests);
        let mut writers = self.writers;
        if tokio::time::timeout(within, async { while writers.join_next().await.is_some() {} }).await.is_err() {
            tracing::warn!("Shutdown: the database did not take the last attempt results in time; their leases will expire and the reclaimer retries them.");
            self.abandon.cancel();
            while writers.join_next().await.is_some() {}
        }
    }
}

/// The next batch: the first outcome waiting (waiting for one), and whatever else has queued,
/// up to [`BATCH`]. None once the completer is closed and drained.
async fn next_batch(incoming: &Mutex<mpsc::Receiver<Request>>) -> Option<Vec<Request>> {
    let mut incoming = incoming.lock().await;
    let first = incoming.recv().await?;
    let mut batch = vec![first];
    while batch.len() < BATCH {
        match incoming.try_recv() {
            Ok(request) => batch.push(request),
            Err(_) => break,
        }
    }
    Some(batch)
}

struct Writer {
    store: Arc<dyn Store>,
    abandon: CancellationToken,
}

impl Writer {
    /// Write `finishes`, splitting around outcomes the database refuses; one result each.
    fn write<'a>(
        &'a self,
        finishes: &'a [AttemptFinish],
    ) -> Pin<Box<dyn Future<Output = Vec<StoreResult<bool>>> + Send + 'a>> {
        Box::pin(async move {
            let error = match self.write_retrying(finishes).await {
                Ok(written) => return written.into_iter().map(Ok).collect(),
                Err(error) => error,
            };
            if error.is_transient() {
                // Only when abandoned at shutdown.
                let message = error.to_string();
                return finishes
                    .iter()
                    .map(|_| Err(StoreError::Database(sqlx::Error::Protocol(message.clone()))))
                    .collect();
            }
            if let [alone] = finishes {
                tracing::error!(execution_id = %alone.execution_id, error = ?error, "The database refused an attempt's result; writing it without its payload.");
                let stripped = alone.without_payload(&describe(&error));
                return vec![self.write_retrying(std::slice::from_ref(&stripped)).await.map(|w| w[0])];
            }
            tracing::warn!(executions = finishes.len(), error = ?error, "The database refused a batch of attempt results; writing it in halves.");
            let (left, right) = finishes.split_at(finishes.len() / 2);
            let mut results = self.write(left).await;
            results.extend(self.write(right).await);
            results
        })
    }

    /// One batch write, retried with backoff while the failure is transient.
    async fn write_retrying(&self, finishes: &[AttemptFinish]) -> StoreResult<Vec<bool>> {
        let mut delay = RETRY_FIRST;
        loop {
            match self.store.execution_finish_many(finishes).await {
                Ok(finished) => {
                    for change in &finished.circuit_changes {
                        crate::metrics::circuit_transition(&change.endpoint, change.transition.to_label());
                        tracing::warn!(endpoint = %change.endpoint, transition = ?change.transition, failures = change.failures, "Circuit breaker changed.");
                    }
                    return Ok(finished.written);
                }
                Err(error) if error.is_transient() => {
                    crate::metrics::result_write_retried();
                    tracing::warn!(%error, executions = finishes.len(), retry_ms = delay.as_millis() as u64, "Could not record attempt results; retrying.");
                    tokio::select! {
                        () = self.abandon.cancelled() => return Err(error),
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(RETRY_MAX);
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// A short cause for the stored error: the database's own message names the problem (an
/// invalid byte sequence, a value too long) without quoting the data.
fn describe(error: &StoreError) -> String {
    match error {
        StoreError::Database(sqlx::Error::Database(db)) => {
            format!("the database answered {}: {}", db.code().unwrap_or_default(), db.message())
        }
        other => other.to_string(),
    }
}
