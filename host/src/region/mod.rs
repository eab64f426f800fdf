//! Multi-region: what exists while the deployment has one region.
//!
//! - [`heartbeat`]: each scheduler and worker writes `region_heartbeats` every 5 s (region
//!   `default`).
//!
//! Not built, and not pretended: no region filter and no health evaluator run. When a second
//! region is added, an evaluator will read `region_heartbeats`, mark a region whose components
//! stopped beating as dead in `region_status` (`alive = false`, `failed_at`) and let a live
//! region adopt its work (`adopted_by`); the claim and scheduler queries will then filter by
//! `crdb_region` against [`crate::store::Store::region_alive`]. The tables and columns for it
//! exist already (migration 0001).

pub mod heartbeat;

/// This deployment's one region.
pub const DEFAULT_REGION: &str = "default";
