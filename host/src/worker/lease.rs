//! Leases: how a worker keeps the executions it holds from being reclaimed while it lives.
//!
//! A claim leases each execution for `TE_WORKER_LEASE_SEC` from the database's clock. While
//! the worker runs, [`Leases::keep`] renews the lease of everything it holds every third of
//! that, in one statement, so a live attempt always has two thirds of a lease ahead of it. An
//! attempt whose own deadline reaches past that (a long `timeout_ms`, a slow plugin) extends
//! its lease to the deadline plus [`LEASE_MARGIN`] before it sends anything. When the worker
//! dies, renewals stop, the lease runs out, and the reclaimer retries the execution; a late
//! result from a worker that was merely cut off is fenced out by the attempt number.
//!
//! Only executions registered here are renewed, and a registration ends when its guard is
//! dropped — even if the attempt's task panics — so nothing is renewed forever.
//!
//! Extensions are written together: with the default lease, every attempt of an endpoint
//! whose timeout is over 13 s (a plugin's default is 30 s) asks for one, the attempts of a
//! claim all at once, and one statement each was a commit per delivery. The first to ask
//! writes everything asked for meanwhile; the rest wait for that one statement, or write the
//! next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::health::Beat;
use crate::store::{LeaseExtend, Store, StoreError, StoreResult};

/// An extension asked for, and where its answer goes.
type Asked = (LeaseExtend, oneshot::Sender<StoreResult<bool>>);

/// Time an attempt's lease must run beyond its deadline: room for recording the result.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

pub struct Leases {
    store: Arc<dyn Store>,
    lease: Duration,
    /// Execution id → the attempt number this worker holds it under, and the token an abort
    /// of it cancels (`super::abort`).
    held: Mutex<HashMap<String, (i32, CancellationToken)>>,
    /// Extensions asked for and not yet written.
    asked: Mutex<Vec<Asked>>,
    /// Held by whoever is writing extensions: one statement at a time.
    writing: tokio::sync::Mutex<()>,
}

/// An execution held by this worker; dropping it stops the renewals.
pub struct Held {
    leases: Arc<Leases>,
    execution_id: String,
    aborted: CancellationToken,
}

impl Held {
    /// Cancelled when an abort of this execution's delivery is asked for.
    pub fn aborted(&self) -> &CancellationToken {
        &self.aborted
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.leases.held.lock().expect("leases lock").remove(&self.execution_id);
    }
}

impl Leases {
    pub fn new(store: Arc<dyn Store>, lease: Duration) -> Arc<Self> {
        Arc::new(Self {
            store,
            lease,
            held: Mutex::default(),
            asked: Mutex::default(),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    /// Register an execution just claimed under `attempt`.
    pub fn hold(self: &Arc<Self>, execution_id: &str, attempt: i32) -> Held {
        let aborted = CancellationToken::new();
        self.held.lock().expect("leases lock").insert(execution_id.to_owned(), (attempt, aborted.clone()));
        Held { leases: self.clone(), execution_id: execution_id.to_owned(), aborted }
    }

    /// Abort the attempts of those of `execution_ids` this worker holds; how many.
    pub fn abort(&self, execution_ids: &[crate::ids::ExecutionId]) -> usize {
        let held = self.held.lock().expect("leases lock");
        let mut aborted = 0;
        for id in execution_ids {
            if let Some((_, token)) = held.get(id.as_str()) {
                if !token.is_cancelled() {
                    token.cancel();
                    aborted += 1;
                }
            }
        }
        aborted
    }

    /// How many executions this worker holds.
    pub fn count(&self) -> usize {
        self.held.lock().expect("leases lock").len()
    }

    /// Make sure the lease lasts `needed` from now: a no-op when routine renewals already
    /// guarantee it (two thirds of a lease), else one extension. False when the execution is
    /// no longer this worker's (reclaimed or cancelled meanwhile).
    pub async fn ensure(&self, execution_id: &str, attempt: i32, needed: Duration) -> StoreResult<bool> {
        if needed <= self.lease * 2 / 3 {
            return Ok(true);
        }
        let for_ms = i64::try_from(needed.as_millis()).unwrap_or(i64::MAX / 2);
        let lease = LeaseExtend { execution_id: execution_id.into(), attempt, for_ms };
        let (answer, answered) = oneshot::channel();
        self.asked.lock().expect("leases lock").push((lease, answer));
        {
            let _writing = self.writing.lock().await;
            let batch = std::mem::take(&mut *self.asked.lock().expect("leases lock"));
            if !batch.is_empty() {
                self.extend(batch).await;
            }
        }
        answered.await.unwrap_or_else(|_| Err(StoreError::Closed))
    }

    /// Write `batch` in one statement and answer each; when some execution was not extended
    /// (no longer this worker's), each is written alone to learn which.
    async fn extend(&self, batch: Vec<Asked>) {
        let (leases, answers): (Vec<LeaseExtend>, Vec<_>) = batch.into_iter().unzip();
        match self.store.execution_lease_extend(&leases).await {
            Ok(n) if n == leases.len() as u64 => answers.into_iter().for_each(|a| drop(a.send(Ok(true)))),
            Ok(_) if leases.len() > 1 => {
                for (lease, answer) in leases.iter().zip(answers) {
                    let alone = self.store.execution_lease_extend(std::slice::from_ref(lease)).await;
                    let _ = answer.send(alone.map(|n| n == 1));
                }
            }
            Ok(_) => answers.into_iter().for_each(|a| drop(a.send(Ok(false)))),
            Err(error) => {
                // Each asker gets the error as it was: transient (the attempt is not counted) or not.
                let message = error.to_string();
                let transient = error.is_transient();
                for answer in answers {
                    let copy = if transient {
                        sqlx::Error::Io(std::io::Error::other(message.clone()))
                    } else {
                        sqlx::Error::Protocol(message.clone())
                    };
                    let _ = answer.send(Err(StoreError::Database(copy)));
                }
            }
        }
    }

    /// Renew every held lease to a full lease from now.
    pub async fn renew(&self) -> StoreResult<u64> {
        let for_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let leases: Vec<LeaseExtend> = self
            .held
            .lock()
            .expect("leases lock")
            .iter()
            .map(|(id, (attempt, _))| LeaseExtend { execution_id: id.as_str().into(), attempt: *attempt, for_ms })
            .collect();
        self.store.execution_lease_renew(&leases).await
    }

    /// Renew held leases every third of a lease until `stop`.
    pub async fn keep(self: Arc<Self>, stop: CancellationToken, beat: Beat) {
        let every = (self.lease / 3).max(Duration::from_millis(100));
        loop {
            beat.beat();
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(every) => {}
            }
            if self.count() == 0 {
                continue;
            }
            if let Err(error) = self.renew().await {
                tracing::warn!(%error, held = self.count(), "Could not renew the leases of executions in flight; retrying.");
            }
        }
        beat.stopped();
    }
}
