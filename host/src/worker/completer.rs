//! The completer: writes finished attempts in batches.
//!
//! Every pipeline hands its attempt's outcome here and waits for the answer. The completer
//! takes whatever has queued up (up to [`BATCH`]) and writes it in one transaction, so under
//! load a hundred executions cost one commit instead of a hundred; when idle, a batch is the
//! one outcome that arrived, written at once — no timer adds latency.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::store::{AttemptFinish, Store, StoreError, StoreResult};

/// The most outcomes one transaction writes.
const BATCH: usize = 128;

type Request = (AttemptFinish, oneshot::Sender<StoreResult<bool>>);

pub struct Completer {
    requests: mpsc::Sender<Request>,
    task: JoinHandle<()>,
}

impl Completer {
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (requests, mut incoming) = mpsc::channel::<Request>(4 * BATCH);
        let task = tokio::spawn(async move {
            while let Some(first) = incoming.recv().await {
                let mut batch = vec![first];
                while batch.len() < BATCH {
                    match incoming.try_recv() {
                        Ok(request) => batch.push(request),
                        Err(_) => break,
                    }
                }
                let (finishes, replies): (Vec<AttemptFinish>, Vec<_>) = batch.into_iter().unzip();
                match store.execution_finish_many(&finishes).await {
                    Ok(written) => {
                        for (reply, ok) in replies.into_iter().zip(written) {
                            let _ = reply.send(Ok(ok));
                        }
                    }
                    Err(error) => {
                        let message = error.to_string();
                        tracing::error!(%error, executions = finishes.len(), "Could not record a batch of attempts.");
                        for reply in replies {
                            let _ = reply.send(Err(StoreError::Database(sqlx::Error::Protocol(message.clone()))));
                        }
                    }
                }
            }
        });
        Self { requests, task }
    }

    /// Record one attempt's outcome; whether it was written (false: fenced out).
    pub async fn finish(&self, finish: AttemptFinish) -> StoreResult<bool> {
        let (reply, answer) = oneshot::channel();
        if self.requests.send((finish, reply)).await.is_err() {
            return Err(StoreError::Database(sqlx::Error::PoolClosed));
        }
        answer.await.unwrap_or(Err(StoreError::Database(sqlx::Error::PoolClosed)))
    }

    /// Stop taking outcomes and wait until those queued are written.
    pub async fn close(self) {
        drop(self.requests);
        let _ = self.task.await;
    }
}
