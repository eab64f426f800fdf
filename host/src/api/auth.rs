//! Bearer API keys. Keys are held as SHA-256 digests and a presented key is compared with every
//! one of them in constant time, so neither timing nor a memory dump reveals a key.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use crate::api::error::ApiError;

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
}

impl ApiKeys {
    pub fn from_hashes(hashes: Vec<KeyHash>) -> Self {
        Self { hashes }
    }

    pub fn verify(&self, presented: &str) -> bool {
        let presented = hash_key(presented);
        // No early exit: the time taken does not depend on which key (if any) matched.
        let mut matched = Choice::from(0);
        for known in &self.hashes {
            matched |= known.ct_eq(&presented);
        }
        matched.into()
    }
}

fn bearer_token(request: &Request) -> Option<&str> {
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

pub async fn require_api_key(State(keys): State<Arc<ApiKeys>>, request: Request, next: Next) -> Response {
    match bearer_token(&request) {
        Some(token) if keys.verify(token) => next.run(request).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_only_known_keys() {
        let keys = ApiKeys::from_hashes(vec![hash_key("alpha-key-0123456789"), hash_key("beta-key-0123456789")]);
        assert!(keys.verify("alpha-key-0123456789"));
        assert!(keys.verify("beta-key-0123456789"));
        assert!(!keys.verify("alpha-key-012345678"));
        assert!(!keys.verify(""));
        assert!(!ApiKeys::from_hashes(vec![]).verify("anything"));
    }

    #[test]
    fn generated_keys_are_distinct_and_prefixed() {
        let (a, b) = (generate_key(), generate_key());
        assert!(a.starts_with("te_") && a.len() > 40);
        assert_ne!(a, b);
    }
}
