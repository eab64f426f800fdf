//! Flow control per endpoint, holding across every worker process: its rate limit (a token
//! bucket, [`rate`]) and its circuit breaker ([`circuit`]). Both keep their state on the
//! endpoint's row, where claims read it; `max_concurrency` and a receiver's `429 Retry-After`
//! pause are plain columns read by the claims themselves (see each store's `execution_claim`).
//! Concurrency keys ([`concurrency`]) bound an endpoint's executions in flight per key of
//! their input, admitted outside the claim.

pub mod circuit;
pub mod concurrency;
pub mod rate;

pub use circuit::{CircuitPolicy, CircuitState, Health, Transition};
pub use concurrency::Concurrency;
pub use rate::{RateLimit, StoredBucket};
