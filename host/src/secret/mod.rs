//! Secret values at rest: AES-256-GCM envelopes, the keys that seal them, and key rotation.
//!
//! An envelope is `[format 0x01][key id: 4 bytes][nonce: 12 bytes][ciphertext + 16-byte tag]`.
//! The key id (the first 4 bytes of the key's SHA-256) lets a server that holds the current key
//! and some previous ones open every envelope during a rotation; the secret's name is bound in
//! as associated data, so an envelope copied onto another secret's row does not open.

pub mod hosts;
mod key;
pub mod redact;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;
use sha2::{Digest, Sha256};

pub use key::{load_keys, KeySource, SecretKeyError};

const FORMAT_V1: u8 = 1;
const KEY_ID_LEN: usize = 4;
const NONCE_LEN: usize = 12;
const HEADER_LEN: usize = 1 + KEY_ID_LEN + NONCE_LEN;

/// A decrypted secret value. Its `Debug` never shows the value, so it cannot reach a log line
/// by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The value itself, for the template renderer and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue([redacted])")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CipherError {
    #[error("the stored secret is not a valid envelope")]
    Malformed,
    #[error("the stored secret was sealed under key id {0}, which this server does not hold (set TE_SECRET_ENCRYPTION_KEY_PREVIOUS)")]
    UnknownKey(String),
    #[error("the stored secret failed authentication (wrong key, or the row was tampered with)")]
    Unauthentic,
}

struct SealingKey {
    id: [u8; KEY_ID_LEN],
    cipher: Aes256Gcm,
}

impl SealingKey {
    fn new(bytes: &[u8; 32]) -> Self {
        let digest = Sha256::digest(bytes);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Self { id, cipher: Aes256Gcm::new(bytes.into()) }
    }
}

/// Seals and opens secret values. One per server, built at start-up from the configured keys.
pub struct SecretCipher {
    current: SealingKey,
    previous: Vec<SealingKey>,
    /// The current key itself, for keys derived from it ([`SecretCipher::derive`]).
    current_bytes: [u8; 32],
}

impl SecretCipher {
    pub fn new(current: &[u8; 32], previous: &[[u8; 32]]) -> Self {
        Self {
            current: SealingKey::new(current),
            previous: previous.iter().map(SealingKey::new).collect(),
            current_bytes: *current,
        }
    }

    /// A key for `purpose`, derived from the current key (HMAC-SHA256 of the purpose under it):
    /// every process holding the same secret key derives the same one, and it says nothing of
    /// the secret key.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.current_bytes).expect("HMAC takes a key of any length");
        mac.update(b"taskexec:derived:");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Seal `value` for the secret `name` under the current key, with a fresh random nonce.
    pub fn seal(&self, name: &str, value: &SecretValue) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let ciphertext = self
            .current
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: value.0.as_bytes(), aad: &aad(name) })
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut envelope = Vec::with_capacity(HEADER_LEN + ciphertext.len());
        envelope.push(FORMAT_V1);
        envelope.extend_from_slice(&self.current.id);
        envelope.extend_from_slice(&nonce);
        envelope.extend_from_slice(&ciphertext);
        envelope
    }

    /// Open an envelope stored for the secret `name`, with whichever held key sealed it.
    pub fn open(&self, name: &str, envelope: &[u8]) -> Result<SecretValue, CipherError> {
        if envelope.len() < HEADER_LEN || envelope[0] != FORMAT_V1 {
            return Err(CipherError::Malformed);
        }
        let key_id = &envelope[1..1 + KEY_ID_LEN];
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == key_id)
            .ok_or_else(|| CipherError::UnknownKey(hex(key_id)))?;
        let nonce = Nonce::from_slice(&envelope[1 + KEY_ID_LEN..HEADER_LEN]);
        let plain = key
            .cipher
            .decrypt(nonce, Payload { msg: &envelope[HEADER_LEN..], aad: &aad(name) })
            .map_err(|_| CipherError::Unauthentic)?;
        String::from_utf8(plain).map(SecretValue).map_err(|_| CipherError::Malformed)
    }

    /// Whether an envelope was sealed under a key other than the current one.
    pub fn needs_reseal(&self, envelope: &[u8]) -> bool {
        envelope.get(1..1 + KEY_ID_LEN) != Some(&self.current.id[..])
    }

    /// The current key's id, as shown in start-up messages (never the key).
    pub fn current_key_id(&self) -> String {
        hex(&self.current.id)
    }
}

fn aad(name: &str) -> Vec<u8> {
    [b"taskexec:secret:".as_slice(), name.as_bytes()].concat()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &str) -> SecretValue {
        SecretValue::new(s.to_owned())
    }

    #[test]
    fn round_trip_with_fresh_nonce_each_time() {
        let cipher = SecretCipher::new(&[7; 32], &[]);
        let a = cipher.seal("email_api_key", &value("sk-live-abc123"));
        let b = cipher.seal("email_api_key", &value("sk-live-abc123"));
        assert_ne!(a, b, "two seals of one value must differ (fresh nonce)");
        assert!(!a.windows(14).any(|w| w == b"sk-live-abc123"), "plaintext visible in envelope");
        assert_eq!(cipher.open("email_api_key", &a).unwrap().expose(), "sk-live-abc123");
        assert_eq!(cipher.open("email_api_key", &b).unwrap().expose(), "sk-live-abc123");
    }

    #[test]
    fn envelope_is_bound_to_its_secret_name() {
        let cipher = SecretCipher::new(&[7; 32], &[]);
        let sealed = cipher.seal("a", &value("v"));
        assert_eq!(cipher.open("b", &sealed), Err(CipherError::Unauthentic));
    }

    #[test]
    fn tampering_is_detected() {
        let cipher = SecretCipher::new(&[7; 32], &[]);
        let mut sealed = cipher.seal("a", &value("value"));
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(cipher.open("a", &sealed), Err(CipherError::Unauthentic));
        assert_eq!(cipher.open("a", &sealed[..5]), Err(CipherError::Malformed));
    }

    #[test]
    fn rotation_opens_old_envelopes_and_reseals_under_the_new_key() {
        let old = SecretCipher::new(&[1; 32], &[]);
        let sealed_old = old.seal("a", &value("v1"));

        let without_old_key = SecretCipher::new(&[2; 32], &[]);
        assert!(matches!(without_old_key.open("a", &sealed_old), Err(CipherError::UnknownKey(_))));

        let rotated = SecretCipher::new(&[2; 32], &[[1; 32]]);
        assert!(rotated.needs_reseal(&sealed_old));
        let opened = rotated.open("a", &sealed_old).unwrap();
        let resealed = rotated.seal("a", &opened);
        assert!(!rotated.needs_reseal(&resealed));
        assert_eq!(SecretCipher::new(&[2; 32], &[]).open("a", &resealed).unwrap().expose(), "v1");
    }

    #[test]
    fn debug_never_shows_the_value() {
        assert_eq!(format!("{:?}", value("hunter2")), "SecretValue([redacted])");
    }
}
