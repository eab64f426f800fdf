//! Bearer API keys. Keys are held as SHA-256 digests and a presented key is compared with every
//! one of them in constant time, so neither timing nor a memory dump reveals a key. Each key
//! may be held to a rate (`TE_API_RATE_LIMIT`): a token bucket per key, answering 429
//! RATE_LIMITED with `Retry-After` once it is empty.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::api::error::{ApiError, ErrorCode};
use crate::api::server::ClientAddr;
use crate::api::throttle::{retry_after_seconds, AuthThrottle};

/// Failed authentications a client address may make in a minute before it is answered 429.
pub const DEFAULT_AUTH_FAILURES_PER_MINUTE: u32 = 30;

pub type KeyHash = [u8; 32];

pub fn hash_key(key: &str) -> KeyHash {
    Sha256::digest(key.as_bytes()).into()
}

/// A fresh key for an operator: `te_` and 32 random bytes.
pub fn generate_key() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("te_{}", URL_SAFE_NO_PAD.encode(bytes))
}

pub struct ApiKeys {
    hashes: Vec<KeyHash>,
    /// One token bucket per key, when a rate is set.
    limiter: Option<governor::DefaultKeyedRateLimiter<KeyHash>>,
    /// Failed authentications per client address (`TE_AUTH_FAILURES_PER_MINUTE`).
    pub throttle: AuthThrottle,
    /// The mark this deployment's deliveries carry (`egress::DELIVERY_MARK`): a request that
    /// bears it is a delivery, and is refused whatever key it presents.
    delivery_mark: Option<String>,
}

impl ApiKeys {
    pub fn from_hashes(hashes: Vec<KeyHash>) -> Self {
        Self {
            hashes,
            limiter: None,
            throttle: AuthThrottle::new(DEFAULT_AUTH_FAILURES_PER_MINUTE),
            delivery_mark: None,
        }
    }

    /// Refuse requests that bear this deployment's delivery mark.
    pub fn with_delivery_mark(mut self, mark: String) -> Self {
        self.delivery_mark = Some(mark);
        self
    }

    /// Throttle a client address after `per_minute` failed authentications (0: never).
    pub fn with_failure_limit(mut self, per_minute: u32) -> Self {
        self.throttle = AuthThrottle::new(per_minute);
        self
    }

    /// Whether `hash` is the hash of one of the keys (a dashboard session's key, say).
    pub fn knows(&self, hash: &KeyHash) -> bool {
        let mut matched = Choice::from(0);
        for known in &self.hashes {
            matched |= known.ct_eq(hash);
        }
        bool::from(matched)
    }

    /// Hold each key to `per_second` requests, `burst` at once (0: twice the rate).
    pub fn with_rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        let Some(rate) = std::num::NonZeroU32::new(per_second) else { return self };
        const TWO: std::num::NonZeroU32 = std::num::NonZeroU32::new(2).expect("2 is not zero");
        let burst = std::num::NonZeroU32::new(burst).unwrap_or(rate.saturating_mul(TWO));
        self.limiter = Some(governor::RateLimiter::keyed(governor::Quota::per_second(rate).allow_burst(burst)));
        self
    }

    /// The key's hash when `presented` is one of the keys.
    pub fn verify(&self, presented: &str) -> Option<KeyHash> {
        let presented = hash_key(presented);
        // No early exit: the time taken does not depend on which key (if any) matched.
        self.knows(&presented).then_some(presented)
    }

    /// How long `key` must wait before its next request, if it is over its rate.
    fn over_rate(&self, key: &KeyHash) -> Option<std::time::Duration> {
        use governor::clock::{Clock, DefaultClock};
        let limiter = self.limiter.as_ref()?;
        limiter.check_key(key).err().map(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

fn bearer_token(request: &Request) -> Option<&str> {
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub async fn require_api_key(State(keys): State<Arc<ApiKeys>>, request: Request, next: Next) -> Response {
    if let Some(mark) = &keys.delivery_mark {
        let marked =
            request.headers().get_all(crate::egress::DELIVERY_MARK).iter().any(|v| v.as_bytes() == mark.as_bytes());
        if marked {
            return ApiError::new(
                ErrorCode::DeliveryRefused,
                "This request is a delivery of this service: deliveries cannot call its API.",
            )
            .into_response();
        }
    }
    let client = request.extensions().get::<ClientAddr>().map(|c| c.0);
    if let Some(wait) = client.and_then(|address| keys.throttle.blocked(address)) {
        return too_many_failures(wait);
    }
    let in_process = request.extensions().get::<InProcessKey>().map(|k| k.0).filter(|hash| keys.knows(hash));
    let Some(key) = in_process.or_else(|| bearer_token(&request).and_then(|token| keys.verify(token))) else {
        if let Some(address) = client {
            keys.throttle.failed(address);
        }
        return ApiError::unauthorized().into_response();
    };
    if let Some(wait) = keys.over_rate(&key) {
        // Whole seconds, rounded up: a client that waits that long finds a token.
        let seconds = retry_after_seconds(wait);
        let mut response = ApiError::new(
            ErrorCode::RateLimited,
            format!("This API key is over its rate limit (TE_API_RATE_LIMIT); retry in {seconds} s."),
        )
        .into_response();
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    next.run(request).await
}

/// A request the dashboard makes on behalf of a signed-in session: authenticated by the hash
/// of the key the session signed in with (set in-process only; no client can send it), so the
/// dashboard never holds the key itself.
#[derive(Debug, Clone, Copy)]
pub struct InProcessKey(pub KeyHash);

/// 429 for a client address that failed authentication too often this minute.
pub fn too_many_failures(wait: std::time::Duration) -> Response {
    let seconds = retry_after_seconds(wait);
    let mut response = ApiError::new(
        ErrorCode::RateLimited,
        format!(
            "Too many failed authentications from this address (TE_AUTH_FAILURES_PER_MINUTE); retry in {seconds} s."
        ),
    )
    .into_response();
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_only_known_keys() {
        let keys = ApiKeys::from_hashes(vec![hash_key("alpha-key-0123456789"), hash_key("beta-key-0123456789")]);
        assert_eq!(keys.verify("alpha-key-0123456789"), Some(hash_key("alpha-key-0123456789")));
        assert!(keys.verify("beta-key-0123456789").is_some());
        assert!(keys.verify("alpha-key-012345678").is_none());
        assert!(keys.verify("").is_none());
        assert!(ApiKeys::from_hashes(vec![]).verify("anything").is_none());
    }

    #[test]
    fn each_key_has_its_own_bucket() {
        let (a, b) = (hash_key("alpha-key-0123456789"), hash_key("beta-key-0123456789"));
        let keys = ApiKeys::from_hashes(vec![a, b]).with_rate_limit(1, 3);
        for _ in 0..3 {
            assert!(keys.over_rate(&a).is_none(), "the burst is allowed");
        }
        let wait = keys.over_rate(&a).expect("the fourth request at once is over the rate");
        assert!(wait <= std::time::Duration::from_secs(1), "{wait:?}");
        assert!(keys.over_rate(&b).is_none(), "another key is not held up");
        assert!(ApiKeys::from_hashes(vec![a]).over_rate(&a).is_none(), "no limit unless one is set");
    }

    #[test]
    fn generated_keys_are_distinct_and_prefixed() {
        let (a, b) = (generate_key(), generate_key());
        assert!(a.starts_with("te_") && a.len() > 40);
        assert_ne!(a, b);
    }
}
