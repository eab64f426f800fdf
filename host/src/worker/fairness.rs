//! Fair shares of a worker's slots between endpoints.
//!
//! Without shares, a worker's slots go to whatever is due first, and one endpoint whose
//! receiver hangs can hold all of them until its attempts time out while every other
//! endpoint waits. So each claim says how many executions of each endpoint it may take:
//!
//! - **A cap per endpoint.** No endpoint holds more than its cap of this worker's slots: its
//!   `max_concurrency` when it sets one, and in any case the worker's slots less a reserve of
//!   a tenth (at least one, when the worker has two or more), so at least that many slots are
//!   always free for other endpoints while one endpoint is saturated.
//! - **Round-robin within a claim.** The claim gives each endpoint with due work an equal part
//!   and takes their executions in turns (every endpoint's first, then every second, …), so
//!   when slots free up they are shared between the endpoints waiting, not handed to the one
//!   with the longest queue.
//!
//! A saturated endpoint wakes the worker as soon as one of its slots frees, so it is claimed
//! for again at once, as a worker whose slots are all busy claims as each frees. (Waiting
//! until it had dropped further below its cap, to claim in batches, measured slower: cron
//! load's last tick came 5-11 s after the minute instead of 3-4 s.)
//! An endpoint's `max_concurrency` is held across workers by the claim itself (it counts every
//! worker's RUNNING executions of the endpoint); here it only decides when a saturated endpoint
//! wakes this worker.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::EndpointShares;

/// How long learned `max_concurrency` values are used before they are read again. They only
/// decide when a saturated endpoint wakes the worker; the claim reads them fresh.
pub const LIMITS_TTL: Duration = Duration::from_secs(5);

pub struct Fairness {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Slots each endpoint holds now.
    held: HashMap<String, usize>,
    /// Endpoints' `max_concurrency`, as last read (for saturation; the claim reads its own).
    limits: HashMap<String, usize>,
    limits_read: Option<Instant>,
    /// Endpoints that reached their cap: the worker is woken when they drop well below it.
    saturated: HashMap<String, usize>,
}

impl Fairness {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, inner: Mutex::default() }
    }

    /// The most slots any one endpoint may hold: all but a reserve of a tenth (at least one).
    pub fn endpoint_ceiling(&self) -> usize {
        if self.capacity < 2 {
            self.capacity
        } else {
            self.capacity - (self.capacity / 10).max(1)
        }
    }

    fn cap(&self, inner: &Inner, endpoint: &str) -> usize {
        let ceiling = self.endpoint_ceiling();
        inner.limits.get(endpoint).map_or(ceiling, |limit| (*limit).min(ceiling))
    }

    /// Whether the endpoints' limits should be read again.
    pub fn limits_stale(&self) -> bool {
        self.inner.lock().expect("fairness lock").limits_read.is_none_or(|at| at.elapsed() >= LIMITS_TTL)
    }

    pub fn set_limits(&self, limits: Vec<(String, i32)>) {
        let mut inner = self.inner.lock().expect("fairness lock");
        inner.limits = limits.into_iter().map(|(e, n)| (e, usize::try_from(n).unwrap_or(0))).collect();
        inner.limits_read = Some(Instant::now());
    }

    /// What a claim may take of each endpoint: what each holds, and the ceiling.
    pub fn shares(&self) -> EndpointShares {
        let inner = self.inner.lock().expect("fairness lock");
        let as_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let held = inner.held.iter().map(|(endpoint, held)| (endpoint.clone(), as_i32(*held))).collect();
        EndpointShares { held, ceiling: as_i32(self.endpoint_ceiling()) }
    }

    /// An execution of `endpoint` took a slot.
    pub fn took(&self, endpoint: &str) {
        let mut inner = self.inner.lock().expect("fairness lock");
        let held = {
            let held = inner.held.entry(endpoint.to_owned()).or_insert(0);
            *held += 1;
            *held
        };
        let cap = self.cap(&inner, endpoint);
        if held >= cap {
            // Claim for it again as soon as it is below its cap.
            let resume_at = cap.saturating_sub(1);
            inner.saturated.insert(endpoint.to_owned(), resume_at);
        }
    }

    /// An execution of `endpoint` gave its slot back; true when the worker should claim again
    /// because a saturated endpoint dropped far enough below its cap.
    pub fn released(&self, endpoint: &str) -> bool {
        let mut inner = self.inner.lock().expect("fairness lock");
        let held = match inner.held.get_mut(endpoint) {
            Some(held) => {
                *held = held.saturating_sub(1);
                *held
            }
            None => 0,
        };
        if held == 0 {
            inner.held.remove(endpoint);
        }
        match inner.saturated.get(endpoint) {
            Some(resume_at) if held <= *resume_at => {
                inner.saturated.remove(endpoint);
                true
            }
            _ => false,
        }
    }

    /// Whether `endpoint` has a `max_concurrency` (as last read).
    pub fn limited(&self, endpoint: &str) -> bool {
        self.inner.lock().expect("fairness lock").limits.contains_key(endpoint)
    }

    /// Whether some endpoint is at its cap (its work may be waiting while slots are free).
    pub fn any_saturated(&self) -> bool {
        !self.inner.lock().expect("fairness lock").saturated.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_never_takes_the_reserve() {
        let f = Fairness::new(4);
        assert_eq!(f.endpoint_ceiling(), 3);
        assert_eq!(Fairness::new(50).endpoint_ceiling(), 45);
        assert_eq!(Fairness::new(1).endpoint_ceiling(), 1);
        for _ in 0..3 {
            f.took("slow");
        }
        let shares = f.shares();
        assert_eq!(shares.allowance("slow", None), 0, "the slow endpoint is at its cap");
        assert_eq!(shares.allowance("fast", None), 3, "another endpoint may use the free slot");
        assert_eq!(shares.allowance("fast", Some(2)), 2, "max_concurrency lowers it");
    }

    #[test]
    fn max_concurrency_caps_and_a_saturated_endpoint_resumes_below_its_cap() {
        let f = Fairness::new(50);
        f.set_limits(vec![("limited".into(), 8)]);
        for _ in 0..8 {
            f.took("limited");
        }
        assert!(f.any_saturated());
        assert_eq!(f.shares().allowance("limited", Some(8)), 0);
        // 8 → 7: below its cap, claim again; no second wake until it is saturated again.
        assert!(f.released("limited"));
        assert!(!f.any_saturated());
        assert!(!f.released("limited"));
        assert_eq!(f.shares().allowance("limited", Some(8)), 2);
    }
}
