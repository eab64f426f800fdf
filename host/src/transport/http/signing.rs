//! Signed deliveries as the Standard Webhooks specification says (standardwebhooks.com, the
//! scheme Svix and others send): an HTTP endpoint with `"signing": {"secret": "{{secret.NAME}}"}`
//! sends three headers with every attempt —
//!
//! - `webhook-id`: the message's id, the same on every attempt of one execution (its idempotency
//!   key), so a receiver can drop a repeat;
//! - `webhook-timestamp`: the attempt's time in whole seconds since the Unix epoch, which a
//!   receiver checks against its clock (the reference libraries accept five minutes either way);
//! - `webhook-signature`: `v1,` and the base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`
//!   under the key, one such signature per key, separated by spaces.
//!
//! A key is written as the spec writes it: `whsec_` and the base64 of 24 to 64 random bytes.
//! Listing two secrets (`"secret": ["{{secret.new}}", "{{secret.old}}"]`) signs with both, so a
//! receiver can move from the old key to the new one without a moment in which deliveries fail.
//! The secrets must be references (`{{secret.NAME}}`): a key written into the spec itself would
//! be stored and shown in clear.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::transport::SpecError;

/// The most keys one endpoint signs with: a rotation needs two.
pub const MAX_KEYS: usize = 4;
/// What a key's text starts with.
const KEY_PREFIX: &str = "whsec_";
/// The shortest and longest key, in bytes once decoded (the specification: 24 to 64).
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The headers a signed delivery carries.
pub const ID: &str = "webhook-id";
pub const TIMESTAMP: &str = "webhook-timestamp";
pub const SIGNATURE: &str = "webhook-signature";

/// An HTTP spec's `signing`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signing {
    /// One key, or several (each signs: key rotation).
    pub secret: Keys,
}

/// One key or a list of them, as the spec gives them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Keys {
    One(String),
    Many(Vec<String>),
}

impl Keys {
    fn all(&self) -> &[String] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }
}

impl Signing {
    /// Registration: one to [`MAX_KEYS`] keys, each a `{{secret.NAME}}` reference.
    pub fn validate(&self) -> Result<(), SpecError> {
        let keys = self.secret.all();
        if keys.is_empty() || keys.len() > MAX_KEYS {
            return Err(SpecError::new("signing.secret", format!("must list 1 to {MAX_KEYS} secrets")));
        }
        for key in keys {
            let inner = key.trim().strip_prefix("{{").and_then(|k| k.strip_suffix("}}")).map(str::trim);
            let name = inner.and_then(|k| k.strip_prefix("secret."));
            // A secret's name, as `api::names::check_secret_name` allows it.
            let secret_name = |n: &str| {
                n.starts_with(|c: char| c.is_ascii_lowercase())
                    && n.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            };
            if !name.is_some_and(secret_name) {
                return Err(SpecError::new(
                    "signing.secret",
                    "must be a `{{secret.NAME}}` reference (a key written into the spec would be stored in clear)",
                ));
            }
        }
        Ok(())
    }

    /// The `webhook-signature` value for message `id` sent at `timestamp` (seconds) with `body`,
    /// the keys rendered; or why a key cannot sign (not a `whsec_` key).
    pub fn signature(&self, id: &str, timestamp: i64, body: &[u8]) -> Result<String, String> {
        let mut signatures = Vec::with_capacity(self.secret.all().len());
        for (i, key) in self.secret.all().iter().enumerate() {
            let key = decode_key(key).ok_or_else(|| {
                format!(
                    "signing.secret[{i}] is not a Standard Webhooks key: `{KEY_PREFIX}` and the base64 of {} to {} bytes",
                    KEY_BYTES.start(),
                    KEY_BYTES.end()
                )
            })?;
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes a key of any length");
            mac.update(id.as_bytes());
            mac.update(b".");
            mac.update(timestamp.to_string().as_bytes());
            mac.update(b".");
            mac.update(body);
            signatures.push(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())));
        }
        Ok(signatures.join(" "))
    }
}

/// A key's bytes: its text after `whsec_`, base64 (padding optional), 24 to 64 bytes.
fn decode_key(text: &str) -> Option<Vec<u8>> {
    let encoded = text.trim().strip_prefix(KEY_PREFIX)?.trim_end_matches('=');
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD.decode(encoded).ok()?;
    KEY_BYTES.contains(&bytes.len()).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signing(keys: &[&str]) -> Signing {
        Signing { secret: Keys::Many(keys.iter().map(|k| (*k).to_owned()).collect()) }
    }

    /// The example of the Standard Webhooks specification's test vectors (the reference
    /// libraries' own tests use it).
    #[test]
    fn the_specification_example_signs_as_its_libraries_do() {
        let key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        let signature = signing(&[key]).signature(id, 1614265330, body).unwrap();
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn each_key_signs_and_bad_keys_are_named() {
        let (a, b) = ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        let both = signing(&[a, b]).signature("m", 1, b"").unwrap();
        let parts: Vec<&str> = both.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], signing(&[a]).signature("m", 1, b"").unwrap());
        for bad in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_short", "whsec_not base64!!", ""] {
            let error = signing(&[a, bad]).signature("m", 1, b"").unwrap_err();
            assert!(error.starts_with("signing.secret[1]"), "{error}");
        }
    }

    #[test]
    fn only_secret_references_are_registered() {
        assert!(signing(&["{{secret.hook_key}}"]).validate().is_ok());
        assert!(signing(&["{{ secret.new }}", "{{secret.old}}"]).validate().is_ok());
        for bad in [
            vec![],
            vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            vec!["{{config.key}}"],
            vec!["{{secret.}}"],
            vec!["{{secret.a-b}}"],
            vec!["{{secret.key}} and more"],
        ] {
            let error = signing(&bad).validate().unwrap_err();
            assert_eq!(error.field, "signing.secret", "{bad:?}");
        }
        assert!(signing(&["{{secret.a}}"; 5]).validate().is_err(), "at most four");
    }
}
