//! Failed authentication, counted per client address: an address that presents
//! `TE_AUTH_FAILURES_PER_MINUTE` wrong keys (to the API or the dashboard's sign-in) within a
//! minute is answered `429 RATE_LIMITED` with `Retry-After` for every request that needs a key,
//! until the minute is over — a right key included, so guessing gets no answer either way.
//! Keys are 16 characters and up, so this is not what keeps them from being guessed; it keeps a
//! client hammering wrong keys from costing the service a key check and a log line each.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses remembered at most; past it, finished windows are dropped, and if none are, all
/// are (the throttle fails open rather than grow without bound under a flood of addresses).
const MAX_ADDRESSES: usize = 65_536;
const WINDOW: Duration = Duration::from_secs(60);

pub struct AuthThrottle {
    limit: u32,
    windows: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl AuthThrottle {
    /// `limit` failures a minute per address; 0 turns the throttle off.
    pub fn new(limit: u32) -> Self {
        Self { limit, windows: Mutex::default() }
    }

    /// How long `client` must wait, if it has failed too often this minute.
    pub fn blocked(&self, client: IpAddr) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let windows = self.windows.lock().expect("auth throttle lock");
        let (started, failures) = windows.get(&client)?;
        let left = WINDOW.checked_sub(started.elapsed())?;
        (*failures >= self.limit).then_some(left)
    }

    /// Count a failed authentication from `client`.
    pub fn failed(&self, client: IpAddr) {
        if self.limit == 0 {
            return;
        }
        let mut windows = self.windows.lock().expect("auth throttle lock");
        if windows.len() >= MAX_ADDRESSES && !windows.contains_key(&client) {
            windows.retain(|_, (started, _)| started.elapsed() < WINDOW);
            if windows.len() >= MAX_ADDRESSES {
                windows.clear();
            }
        }
        let window = windows.entry(client).or_insert((Instant::now(), 0));
        if window.0.elapsed() >= WINDOW {
            *window = (Instant::now(), 0);
        }
        window.1 = window.1.saturating_add(1);
    }
}

/// Whole seconds to tell a client to wait (`Retry-After`), at least one.
pub fn retry_after_seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_after_its_failures_and_others_are_not() {
        let throttle = AuthThrottle::new(3);
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        for _ in 0..2 {
            throttle.failed(a);
        }
        assert!(throttle.blocked(a).is_none(), "two failures are under the limit");
        throttle.failed(a);
        let wait = throttle.blocked(a).expect("the third failure blocks");
        assert!(wait <= WINDOW && wait > Duration::from_secs(50), "{wait:?}");
        assert!(throttle.blocked(b).is_none());
        assert!(AuthThrottle::new(0).blocked(a).is_none());
    }
}
