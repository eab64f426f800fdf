//! Multi-region stubs, present and inactive until a second region is added.
//!
//! - [`heartbeat`]: each scheduler and worker writes `region_heartbeats` every 5 s (region
//!   `default`); nothing reads them yet.
//! - [`RegionFilter`]: the regions whose rows this process works on. The refresher reads
//!   `region_status` every 10 s; the filter answers "all" today, so queries do not filter by
//!   `crdb_region` — the seam where that filter goes when regions arrive.
//! - [`evaluator`]: the health evaluator that will declare a region dead and let another adopt
//!   its work. Not built: it waits for shutdown.

pub mod evaluator;
pub mod heartbeat;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// This deployment's one region.
pub const DEFAULT_REGION: &str = "default";

/// The regions whose work this process takes. A no-op today: every query covers all rows.
#[derive(Debug, Clone)]
pub struct RegionFilter {
    alive: Arc<RwLock<Vec<String>>>,
}

impl Default for RegionFilter {
    fn default() -> Self {
        Self { alive: Arc::new(RwLock::new(vec![DEFAULT_REGION.to_owned()])) }
    }
}

impl RegionFilter {
    pub fn active_regions(&self) -> Vec<String> {
        self.alive.read().expect("region filter lock").clone()
    }

    /// Refresh from `region_status` every 10 s. Single-region deployments always see
    /// `default`; the list is kept so turning filtering on later is a one-line change.
    pub async fn refresh_loop(self, store: Arc<dyn Store>, shutdown: CancellationToken) {
        loop {
            match store.region_alive().await {
                Ok(regions) if !regions.is_empty() => *self.alive.write().expect("region filter lock") = regions,
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "Could not read region status."),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(10)) => {}
            }
        }
    }
}
