//! Aborts of deliveries in flight (`POST /executions/{id}/cancel?running=abort`). The API marks
//! the RUNNING execution (`abort_requested_at`) and tells the workers (LISTEN/NOTIFY where the
//! database has it); the worker holding it learns of it here, at once when told, else within
//! [`EVERY`], and cancels the attempt's token ([`super::lease::Held::aborted`]). The pipeline
//! then drops the delivery where it is — an HTTP request's connection is closed — and records
//! the attempt and the execution CANCELLED, never retried. Were the worker lost instead, the
//! reclaimer cancels the execution when its lease runs out.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::lease::Leases;
use crate::health::Beat;
use crate::store::Store;

/// How often a worker holding anything asks for the aborts asked of it, when not told: one
/// query of an index of the few executions ever aborted.
pub const EVERY: Duration = Duration::from_secs(1);

/// Watch for aborts of what `worker_id` holds until `stop`; `told` is woken by the signal
/// ([`crate::store::Signal::AbortRequested`], which the worker listens for with new work).
pub async fn watch(
    store: Arc<dyn Store>,
    leases: Arc<Leases>,
    worker_id: String,
    told: Arc<Notify>,
    stop: CancellationToken,
    beat: Beat,
) {
    loop {
        beat.beat();
        tokio::select! {
            () = stop.cancelled() => break,
            () = told.notified() => {}
            () = tokio::time::sleep(EVERY) => {}
        }
        if leases.count() == 0 {
            continue;
        }
        match store.executions_aborting(&worker_id).await {
            Ok(ids) if !ids.is_empty() => {
                let aborted = leases.abort(&ids);
                if aborted > 0 {
                    tracing::info!(aborted, "Aborting deliveries in flight, as asked.");
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "Could not look for aborts asked of this worker; retrying."),
        }
    }
    beat.stopped();
}
