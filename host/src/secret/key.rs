//! Where the secret-encryption keys come from: `TE_SECRET_ENCRYPTION_KEY` (and
//! `TE_SECRET_ENCRYPTION_KEY_PREVIOUS` during a rotation), or, in embedded mode with neither,
//! a key file generated beside the database.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;

/// Where the current key came from, for the one start-up message about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Environment,
    KeyFile { path: PathBuf, generated: bool },
}

#[derive(Debug, thiserror::Error)]
pub enum SecretKeyError {
    /// Never includes the value: a half-right key is still a secret.
    #[error("{variable} must be 32 random bytes in standard base64 (44 characters; generate one with `openssl rand -base64 32`): {problem}")]
    Invalid { variable: &'static str, problem: String },
    #[error("TE_SECRET_ENCRYPTION_KEY is not set. With PostgreSQL every server of a deployment must share one key, so taskexec will not invent one: generate it with `openssl rand -base64 32` and set it on every server")]
    MissingForPostgres,
    #[error("cannot use the key file {path}: {source}")]
    KeyFile { path: PathBuf, source: std::io::Error },
}

pub type KeyBytes = [u8; 32];

/// Decode one configured key.
pub fn parse_key(variable: &'static str, text: &str) -> Result<KeyBytes, SecretKeyError> {
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| SecretKeyError::Invalid { variable, problem: format!("not base64 ({e})") })?;
    bytes.try_into().map_err(|b: Vec<u8>| SecretKeyError::Invalid {
        variable,
        problem: format!("decodes to {} bytes, not 32", b.len()),
    })
}

/// The current key and the previous ones, from configuration or (embedded mode only, when
/// `key_file` is given) from a key file that is created with mode 0600 on first use.
pub fn load_keys(
    current: Option<&str>,
    previous: Option<&str>,
    key_file: Option<&Path>,
) -> Result<(KeyBytes, Vec<KeyBytes>, KeySource), SecretKeyError> {
    let previous = previous
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|k| parse_key("TE_SECRET_ENCRYPTION_KEY_PREVIOUS", k))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(text) = current.map(str::trim).filter(|k| !k.is_empty()) {
        return Ok((parse_key("TE_SECRET_ENCRYPTION_KEY", text)?, previous, KeySource::Environment));
    }
    let Some(path) = key_file else { return Err(SecretKeyError::MissingForPostgres) };
    let (key, generated) = read_or_create_key_file(path)?;
    Ok((key, previous, KeySource::KeyFile { path: path.to_owned(), generated }))
}

fn read_or_create_key_file(path: &Path) -> Result<(KeyBytes, bool), SecretKeyError> {
    let io_error = |source| SecretKeyError::KeyFile { path: path.to_owned(), source };
    // create_new: two servers starting at once cannot both write a key; the loser reads.
    match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut file) => {
            let mut key = [0u8; 32];
            rand::rngs::OsRng.fill_bytes(&mut key);
            file.write_all(format!("{}\n", STANDARD.encode(key)).as_bytes()).map_err(io_error)?;
            file.sync_all().map_err(io_error)?;
            Ok((key, true))
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let mut text = String::new();
            std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)).map_err(io_error)?;
            Ok((parse_key("the key file", &text)?, false))
        }
        Err(e) => Err(io_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn bad_keys_are_refused_without_echoing_them() {
        let err = parse_key("TE_SECRET_ENCRYPTION_KEY", "c2hvcnQ=").unwrap_err().to_string();
        assert!(err.contains("TE_SECRET_ENCRYPTION_KEY") && err.contains("5 bytes"), "{err}");
        let err = parse_key("TE_SECRET_ENCRYPTION_KEY", "not base64 at all!").unwrap_err().to_string();
        assert!(!err.contains("not base64 at all!"), "{err}");
    }

    #[test]
    fn postgres_without_a_key_is_refused() {
        assert!(matches!(load_keys(None, None, None), Err(SecretKeyError::MissingForPostgres)));
    }

    #[test]
    fn embedded_key_file_is_created_0600_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("taskexec.db.key");
        let (first, _, source) = load_keys(None, None, Some(&path)).unwrap();
        assert_eq!(source, KeySource::KeyFile { path: path.clone(), generated: true });
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (second, _, source) = load_keys(None, None, Some(&path)).unwrap();
        assert_eq!(first, second);
        assert_eq!(source, KeySource::KeyFile { path, generated: false });
    }

    #[test]
    fn environment_key_wins_over_the_key_file() {
        let key = STANDARD.encode([9u8; 32]);
        let old = STANDARD.encode([8u8; 32]);
        let (current, previous, source) =
            load_keys(Some(&key), Some(&format!(" {old} ,")), Some(Path::new("/nonexistent/x"))).unwrap();
        assert_eq!((current, previous, source), ([9u8; 32], vec![[8u8; 32]], KeySource::Environment));
    }
}
