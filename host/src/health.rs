//! Liveness of the process's loops, for `/healthz`.
//!
//! A process is healthy when every loop it runs (the worker's claim loop and lease keeper, the
//! scheduler's materializer, promoter and reclaimer) is still going round. Each loop holds a
//! [`Beat`], beats at every turn, and says how long it may stay quiet: its longest wait plus
//! room for a slow database call. A loop that has not beaten within that time is reported
//! stuck; one whose task ended without being stopped (it panicked) is reported dead at once,
//! when its `Beat` is dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Room a loop gets beyond its own longest wait: a database call that takes the pool's whole
/// acquire timeout, then some.
pub const SLACK: Duration = Duration::from_secs(60);

pub struct Liveness {
    loops: Mutex<BTreeMap<&'static str, Entry>>,
    slack: Duration,
}

struct Entry {
    last: Instant,
    quiet_max: Duration,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Running,
    /// Ended cleanly (shutdown).
    Stopped,
    /// Its task ended without stopping: it panicked.
    Dead,
}

/// One loop's heartbeat. Dropping it without [`Beat::stopped`] reports the loop dead.
pub struct Beat {
    liveness: Arc<Liveness>,
    name: &'static str,
}

/// What `/healthz` shows of one loop.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LoopHealth {
    pub name: &'static str,
    pub state: State,
    /// Whether it is running and beat recently enough.
    pub alive: bool,
    pub last_beat_ms_ago: u64,
    pub quiet_max_ms: u64,
}

impl Liveness {
    pub fn new() -> Arc<Self> {
        Self::with_slack(SLACK)
    }

    /// With another allowance than [`SLACK`] beyond each loop's longest wait.
    pub fn with_slack(slack: Duration) -> Arc<Self> {
        Arc::new(Self { loops: Mutex::default(), slack })
    }

    /// Start watching loop `name`, which waits at most `longest_wait` between turns.
    pub fn register(self: &Arc<Self>, name: &'static str, longest_wait: Duration) -> Beat {
        let entry = Entry { last: Instant::now(), quiet_max: longest_wait + self.slack, state: State::Running };
        self.loops.lock().expect("liveness lock").insert(name, entry);
        Beat { liveness: self.clone(), name }
    }

    /// Every loop's health; healthy when all are alive (stopped loops count as healthy).
    pub fn report(&self) -> (bool, Vec<LoopHealth>) {
        let loops = self.loops.lock().expect("liveness lock");
        let report: Vec<LoopHealth> = loops
            .iter()
            .map(|(name, entry)| {
                let ago = entry.last.elapsed();
                LoopHealth {
                    name,
                    state: entry.state,
                    alive: entry.state == State::Running && ago <= entry.quiet_max,
                    last_beat_ms_ago: u64::try_from(ago.as_millis()).unwrap_or(u64::MAX),
                    quiet_max_ms: u64::try_from(entry.quiet_max.as_millis()).unwrap_or(u64::MAX),
                }
            })
            .collect();
        let healthy = report.iter().all(|l| l.alive || l.state == State::Stopped);
        (healthy, report)
    }

    fn set(&self, name: &'static str, state: Option<State>) {
        if let Some(entry) = self.loops.lock().expect("liveness lock").get_mut(name) {
            match state {
                None => entry.last = Instant::now(),
                Some(state) => entry.state = state,
            }
        }
    }
}

impl Beat {
    /// The loop went round.
    pub fn beat(&self) {
        self.liveness.set(self.name, None);
    }

    /// The loop ended on purpose (shutdown).
    pub fn stopped(self) {
        self.liveness.set(self.name, Some(State::Stopped));
        std::mem::forget(self);
    }
}

impl Drop for Beat {
    fn drop(&mut self) {
        self.liveness.set(self.name, Some(State::Dead));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_quiet_loop_is_stuck_and_a_dropped_one_is_dead() {
        let liveness = Liveness::with_slack(Duration::ZERO);
        let quick = liveness.register("quick", Duration::ZERO);
        let patient = liveness.register("patient", Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (healthy, report) = liveness.report();
        assert!(!healthy, "quick has been quiet longer than it may");
        assert!(report.iter().any(|l| l.name == "quick" && !l.alive && l.state == State::Running));
        assert!(report.iter().any(|l| l.name == "patient" && l.alive));

        drop(quick);
        patient.beat();
        let (healthy, report) = liveness.report();
        assert!(!healthy);
        assert!(report.iter().any(|l| l.name == "quick" && l.state == State::Dead));
    }

    #[tokio::test]
    async fn a_stopped_loop_is_not_a_failure() {
        let liveness = Liveness::with_slack(Duration::ZERO);
        liveness.register("done", Duration::ZERO).stopped();
        let _patient = liveness.register("patient", Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(liveness.report().0);
    }
}
