//! Bearer API keys, and who each one is: an operator key (`TE_API_KEYS`, or the key the
//! service generated for itself), which may do everything, or a key issued to a tenant with a
//! role (`POST /tenants/{tenant}/api-keys`). Keys are held as SHA-256 digests, so a memory dump
//! reveals none; a presented key is hashed first and compared with the operator keys in
//! constant time, then looked up among the issued ones by its digest. Each key may be held to a
//! rate (`TE_API_RATE_LIMIT`): a token bucket per key, answering 429 RATE_LIMITED with
//! `Retry-After` once it is empty.
//!
//! Issued keys live in the database; every API process reloads those not revoked every
//! [`ISSUED_KEYS_RELOAD`], so a key made or revoked through one process holds on every other
//! within that time (and at once on the process that made or revoked it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER};
use axum::http::{HeaderValue, Method};
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
use crate::domain::{KeyRole, Scope};
use crate::ids::ApiKeyId;
use crate::store::{ActiveKey, Store};

/// How often each API process reloads the issued keys that are not revoked: the longest a
/// revocation takes to reach every process.
pub const ISSUED_KEYS_RELOAD: Duration = Duration::from_millis(250);

/// Who a request comes from, once its key is known; handlers take it as an extractor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An operator key: every route, every tenant.
    Operator,
    /// A key issued to a tenant, with its role.
    Tenant(IssuedKey),
}

/// A key issued to a tenant, as authentication holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedKey {
    pub key_id: ApiKeyId,
    pub tenant: String,
    pub role: KeyRole,
}

impl Caller {
    /// How the caller is named in a refusal: "an operator key" or "this `read` key of tenant
    /// `default`".
    pub fn describe(&self) -> String {
        match self {
            Self::Operator => "an operator key".to_owned(),
            Self::Tenant(key) => format!("this key (role `{}`, tenant `{}`)", key.role, key.tenant),
        }
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, ApiError> {
        // Set by `require_api_key` on every authenticated route.
        parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

/// The header in which an operator key names the tenant its request acts within.
pub const TENANT_HEADER: &str = "taskexec-tenant";

/// The tenant a request acts within: a tenant's key acts within its tenant; an operator key
/// within the tenant its request names in [`TENANT_HEADER`], else `default` (the tenant of a
/// single-team install). A tenant that does not exist, or a tenant's key naming another
/// tenant, is `404 TENANT_NOT_FOUND`, as if it did not exist.
impl axum::extract::FromRequestParts<crate::api::state::AppState> for Scope {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &crate::api::state::AppState,
    ) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let named = match parts.headers.get(TENANT_HEADER) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| {
                ApiError::invalid_request(format!("The `{TENANT_HEADER}` header must be a tenant's name."))
            })?),
        };
        let not_found =
            |name: &str| ApiError::new(ErrorCode::TenantNotFound, format!("Tenant '{name}' does not exist."));
        let scope = match (caller, named) {
            (Caller::Operator, None) => Ok(Scope::default()),
            (Caller::Operator, Some(name)) => match state.store.tenant_get(name).await? {
                Some(tenant) => Ok(Scope::new(&tenant.name)),
                None => Err(not_found(name)),
            },
            (Caller::Tenant(key), None) => Ok(Scope::new(&key.tenant)),
            (Caller::Tenant(key), Some(name)) if name == key.tenant => Ok(Scope::new(&key.tenant)),
            (Caller::Tenant(_), Some(name)) => Err(not_found(name)),
        }?;
        // The request's log line names the tenant it acted within.
        tracing::Span::current().record("tenant", scope.tenant());
        Ok(scope)
    }
}

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
    /// The operator keys' hashes.
    hashes: Vec<KeyHash>,
    /// Keys issued to tenants and not revoked, by hash: replaced whole at each reload.
    issued: RwLock<Arc<HashMap<KeyHash, IssuedKey>>>,
    /// Counts the keys this process issued or revoked itself: a reload whose read began before
    /// one of those is dropped, so that it cannot bring back a key revoked meanwhile.
    local_changes: AtomicU64,
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
            issued: RwLock::default(),
            local_changes: AtomicU64::new(0),
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
        self.caller(hash).is_some()
    }

    /// Who holds the key whose hash is `hash`, if anyone.
    pub fn caller(&self, hash: &KeyHash) -> Option<Caller> {
        let mut operator = Choice::from(0);
        for known in &self.hashes {
            operator |= known.ct_eq(hash);
        }
        if bool::from(operator) {
            return Some(Caller::Operator);
        }
        // A digest of a random key: looking it up by value reveals nothing of any key.
        self.issued_now().get(hash).cloned().map(Caller::Tenant)
    }

    fn issued_now(&self) -> Arc<HashMap<KeyHash, IssuedKey>> {
        self.issued.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Hold exactly these issued keys (a reload from the database).
    pub fn replace_issued(&self, keys: Vec<ActiveKey>) {
        self.replace_issued_if(keys, None);
    }

    /// [`Self::replace_issued`], unless this process issued or revoked a key since `read_at`
    /// (a count of [`Self::local_changes`] taken before the keys were read).
    fn replace_issued_if(&self, keys: Vec<ActiveKey>, read_at: Option<u64>) {
        let keys = keys
            .into_iter()
            .filter_map(|k| {
                let hash = KeyHash::try_from(k.key_hash).ok()?;
                Some((hash, IssuedKey { key_id: k.key_id, tenant: k.tenant, role: k.role }))
            })
            .collect();
        let mut issued = self.issued.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if read_at.is_none_or(|read_at| read_at == self.local_changes.load(Ordering::SeqCst)) {
            *issued = Arc::new(keys);
        }
    }

    /// A key this process has just issued: usable here at once, elsewhere at the next reload.
    pub fn add_issued(&self, hash: KeyHash, key: IssuedKey) {
        let mut issued = self.issued.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.local_changes.fetch_add(1, Ordering::SeqCst);
        let mut keys = HashMap::clone(&issued);
        keys.insert(hash, key);
        *issued = Arc::new(keys);
    }

    /// A key this process has just revoked: refused here at once, elsewhere at the next reload.
    pub fn remove_issued(&self, key_id: &ApiKeyId) {
        let mut issued = self.issued.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.local_changes.fetch_add(1, Ordering::SeqCst);
        let mut keys = HashMap::clone(&issued);
        keys.retain(|_, key| key.key_id != *key_id);
        *issued = Arc::new(keys);
    }

    /// Reload the issued keys every [`ISSUED_KEYS_RELOAD`] until `stop`. A failed reload keeps
    /// the keys of the last one (and says so, once until a reload succeeds again).
    pub async fn keep_issued_loaded(self: Arc<Self>, store: Arc<dyn Store>, stop: tokio_util::sync::CancellationToken) {
        let mut failing = false;
        let mut every = tokio::time::interval(ISSUED_KEYS_RELOAD);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let read_at = self.local_changes.load(Ordering::SeqCst);
            match store.tenant_keys_active().await {
                Ok(keys) => {
                    failing = false;
                    self.replace_issued_if(keys, Some(read_at));
                }
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(error = %crate::error_chain::describe(&error), "Could not reload the tenants' API keys; keeping the last ones read.");
                }
                Err(_) => {}
            }
        }
    }

    /// Hold each key to `per_second` requests, `burst` at once (0: twice the rate).
    pub fn with_rate_limit(mut self, per_second: u32, burst: u32) -> Self {
        let Some(rate) = std::num::NonZeroU32::new(per_second) else { return self };
        const TWO: std::num::NonZeroU32 = std::num::NonZeroU32::new(2).expect("2 is not zero");
        let burst = std::num::NonZeroU32::new(burst).unwrap_or(rate.saturating_mul(TWO));
        self.limiter = Some(governor::RateLimiter::keyed(governor::Quota::per_second(rate).allow_burst(burst)));
        self
    }

    /// The key's hash and its holder when `presented` is one of the keys.
    pub fn verify(&self, presented: &str) -> Option<(KeyHash, Caller)> {
        let presented = hash_key(presented);
        // No early exit among the operator keys: the time taken does not depend on which key
        // (if any) matched.
        self.caller(&presented).map(|caller| (presented, caller))
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
    let in_process =
        request.extensions().get::<InProcessKey>().map(|k| k.0).and_then(|hash| Some((hash, keys.caller(&hash)?)));
    let Some((key, caller)) = in_process.or_else(|| bearer_token(&request).and_then(|token| keys.verify(token))) else {
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
    let mut request = request;
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// A `read` key may only GET: anything else is refused before its handler runs. A layer of
/// its own, inside the audit trail's, so that the refusal is recorded too.
///
/// Plugins are shared by every tenant: installed, removed and rolled back by operator keys and
/// the `default` tenant's keys; another tenant's keys read them and deliver through them.
pub async fn require_role(request: Request, next: Next) -> Response {
    if let Some(caller @ Caller::Tenant(key)) = request.extensions().get::<Caller>() {
        let reads = matches!(*request.method(), Method::GET | Method::HEAD);
        if key.role == KeyRole::Read && !reads {
            return forbidden(caller, "may only read (GET)").into_response();
        }
        let plugins = request.uri().path() == "/plugins" || request.uri().path().starts_with("/plugins/");
        if plugins && !reads && key.tenant != crate::domain::DEFAULT_TENANT {
            return forbidden(
                caller,
                "may deliver through the plugins the operator installs, not install, remove or roll one back",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// 403 FORBIDDEN: the caller's key may not do this.
pub fn forbidden(caller: &Caller, what: &str) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, format!("{}: {what}.", capitalize(&caller.describe())))
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
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
        assert_eq!(keys.verify("alpha-key-0123456789"), Some((hash_key("alpha-key-0123456789"), Caller::Operator)));
        assert!(keys.verify("beta-key-0123456789").is_some());
        assert!(keys.verify("alpha-key-012345678").is_none());
        assert!(keys.verify("").is_none());
        assert!(ApiKeys::from_hashes(vec![]).verify("anything").is_none());
    }

    #[test]
    fn issued_keys_are_held_with_their_role_until_removed() {
        let keys = ApiKeys::from_hashes(vec![hash_key("operator-key-0123456789")]);
        let issued = IssuedKey { key_id: ApiKeyId::new(), tenant: "default".into(), role: KeyRole::Read };
        assert!(keys.verify("issued-key-0123456789").is_none());
        keys.add_issued(hash_key("issued-key-0123456789"), issued.clone());
        assert_eq!(keys.verify("issued-key-0123456789").map(|(_, c)| c), Some(Caller::Tenant(issued.clone())));
        assert_eq!(keys.verify("operator-key-0123456789").map(|(_, c)| c), Some(Caller::Operator));
        keys.remove_issued(&issued.key_id);
        assert!(keys.verify("issued-key-0123456789").is_none(), "a revoked key is refused at once");
        keys.replace_issued(vec![ActiveKey {
            key_hash: hash_key("issued-key-0123456789").to_vec(),
            key_id: issued.key_id.clone(),
            tenant: "default".into(),
            role: KeyRole::Write,
        }]);
        let Some((_, Caller::Tenant(reloaded))) = keys.verify("issued-key-0123456789") else { panic!("reloaded") };
        assert_eq!(reloaded.role, KeyRole::Write);
        keys.replace_issued(Vec::new());
        assert!(!keys.knows(&hash_key("issued-key-0123456789")));

        // A reload read before this process revoked a key does not bring it back.
        keys.add_issued(hash_key("issued-key-0123456789"), issued.clone());
        let read_at = keys.local_changes.load(Ordering::SeqCst);
        let stale = vec![ActiveKey {
            key_hash: hash_key("issued-key-0123456789").to_vec(),
            key_id: issued.key_id.clone(),
            tenant: "default".into(),
            role: KeyRole::Read,
        }];
        keys.remove_issued(&issued.key_id);
        keys.replace_issued_if(stale.clone(), Some(read_at));
        assert!(keys.verify("issued-key-0123456789").is_none(), "the stale reload was dropped");
        keys.replace_issued_if(stale, Some(keys.local_changes.load(Ordering::SeqCst)));
        assert!(keys.verify("issued-key-0123456789").is_some(), "a reload read after it is taken");
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
