//! Single creates written together: `POST /jobs` requests that arrive while a write is under
//! way are written by the next one, in one transaction (`Jobs::job_insert_many`, as
//! `POST /jobs/batch` writes), and each request gets its own row back.
//!
//! Why: a create is one short transaction, and its commit waits for the log to reach the disk.
//! Sampling PostgreSQL during 32 concurrent creators found COMMIT waiting on `WALWrite`/`WALSync`
//! in 56 of 91 active samples (1,345 creates/s); PostgreSQL's own `commit_delay` did not help
//! (1,140/s at 500 µs). Nothing waits to fill a batch: a request alone is written at once, and
//! under load each commit carries every create that queued behind the one before. Measured
//! (engine benchmark, 32 clients): SQLite 1,095 → ~2,460 creates/s; PostgreSQL unchanged
//! (~1,300/s), where the batch's row-by-row statements were the cost, until a batch was
//! written with `UNNEST` arrays (`insert_jobs`; 2,194/s on 2026-11-25's morning box).
//!
//! One writer per process, on both backends: each commit then carries every create that queued
//! while the one before was written. Four writers on PostgreSQL split the queue into batches
//! of ~3 creates (`pg_stat_database`: ~0.6 transactions per create at 32 clients), and the
//! extra transactions were CPU the database no longer had: one writer against four, API
//! alone, 32 clients, interleaved, 7,256 against 5,825 creates/s, p99 7.5 against 9.8 ms (two
//! writers 6,525/s); every role in one process 3,099 · 3,144 against 2,433 · 2,652/s. (Four
//! dated from when a batch was written row by row, and one connection's round trips were the
//! limit.) SQLite writes one transaction at a time whatever we do.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::store::{Inserted, Job, NewJob, Store, StoreError, StoreResult};

/// The most creates one transaction writes.
const MAX_PER_WRITE: usize = 256;

/// A create waiting to be written, and where to hand it back with what the write found.
type Request = (NewJob, oneshot::Sender<StoreResult<(NewJob, Inserted<Job>)>>);

/// The queue of creates waiting to be written, and the task that writes them.
#[derive(Clone)]
pub struct JobWriter {
    queue: mpsc::UnboundedSender<Request>,
}

impl JobWriter {
    /// Start the writing task on `store`; it ends when every handle is dropped.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (queue, waiting) = mpsc::unbounded_channel();
        tokio::spawn(write_all(store, waiting));
        Self { queue }
    }

    /// Insert a create's job (and a one-shot job's execution) as `Jobs::job_insert` does;
    /// the create comes back with what the write found, neither copied nor re-read.
    pub async fn insert(&self, new: NewJob) -> StoreResult<(NewJob, Inserted<Job>)> {
        let (answer, answered) = oneshot::channel();
        self.queue.send((new, answer)).map_err(|_| StoreError::Closed)?;
        answered.await.map_err(|_| StoreError::Closed)?
    }
}

/// The writer: takes what is waiting, writes it, repeats.
async fn write_all(store: Arc<dyn Store>, mut waiting: mpsc::UnboundedReceiver<Request>) {
    let mut batch = Vec::with_capacity(MAX_PER_WRITE);
    while waiting.recv_many(&mut batch, MAX_PER_WRITE).await > 0 {
        let writes: Vec<_> = batch.iter().map(|(p, _)| (&p.job, p.execution.as_ref())).collect();
        match store.job_insert_many(&writes).await {
            Ok(inserted) => {
                for ((new, answer), inserted) in batch.drain(..).zip(inserted) {
                    let _ = answer.send(inserted.map(|inserted| (new, inserted)));
                }
            }
            // One create's failure must not become the others': each is written alone, and
            // answered with its own outcome.
            Err(_) => {
                for (new, answer) in batch.drain(..) {
                    let inserted = store.job_insert(&new.job, new.execution.as_ref()).await;
                    let _ = answer.send(inserted.map(|inserted| (new, inserted)));
                }
            }
        }
    }
}
