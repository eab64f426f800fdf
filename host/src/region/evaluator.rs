//! The region health evaluator: deliberately not built yet.
//!
//! When a second region is added it will read `region_heartbeats`, mark a region whose
//! components stopped beating as dead in `region_status` (`alive = false`, `failed_at`), and
//! let a live region adopt its work (`adopted_by`), which the [`super::RegionFilter`] then
//! includes. Until then it does nothing but wait for shutdown.

use tokio_util::sync::CancellationToken;

pub async fn run(shutdown: CancellationToken) {
    shutdown.cancelled().await;
}
