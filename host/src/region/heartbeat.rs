//! Heartbeats: each role writes `region_heartbeats` every 5 s, and `DEAD` on a clean shutdown.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::DEFAULT_REGION;
use crate::store::Store;

pub const INTERVAL: Duration = Duration::from_secs(5);

pub async fn run(store: Arc<dyn Store>, component: String, shutdown: CancellationToken) {
    let metadata = json!({ "pid": std::process::id(), "version": env!("CARGO_PKG_VERSION") });
    loop {
        if let Err(error) = store.heartbeat_write(DEFAULT_REGION, &component, "ALIVE", &metadata).await {
            tracing::debug!(%error, %component, "Heartbeat write failed.");
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
    let _ = store.heartbeat_write(DEFAULT_REGION, &component, "DEAD", &metadata).await;
}
