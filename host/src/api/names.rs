//! Resource names: URL-safe and template-safe.

use crate::api::error::ApiError;

pub const MAX_NAME_LEN: usize = 100;

/// Payload specs, configs and endpoints: lowercase alphanumerics in hyphen-separated words
/// (`send-welcome-email`).
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    let words_ok =
        name.split('-').all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    if name.len() > MAX_NAME_LEN || !words_ok {
        return Err(ApiError::invalid_field(
            field,
            format!("must be 1-{MAX_NAME_LEN} lowercase letters, digits and single hyphens, not starting or ending with a hyphen"),
        ));
    }
    Ok(())
}

/// Secrets: lowercase alphanumerics and underscores, starting with a letter (`email_api_key`).
/// A secret is referenced as `{{secret.NAME}}`, where a hyphen would read as a minus sign, so
/// unlike other names a secret's name must be a template identifier.
pub fn check_secret_name(field: &str, name: &str) -> Result<(), ApiError> {
    let starts_with_letter = name.bytes().next().is_some_and(|b| b.is_ascii_lowercase());
    let rest_ok = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if name.len() > MAX_NAME_LEN || !starts_with_letter || !rest_ok {
        return Err(ApiError::invalid_field(
            field,
            format!("must be 1-{MAX_NAME_LEN} lowercase letters, digits and underscores, starting with a letter (it is used as {{{{secret.NAME}}}})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names() {
        for ok in ["a", "send-welcome-email", "v2", "a-1-b"] {
            assert!(check_name("name", ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b", "é", &"a".repeat(101)] {
            let err = check_name("name", bad).unwrap_err();
            assert!(err.message.starts_with("`name`"), "{bad}: {}", err.message);
        }
    }

    #[test]
    fn secret_names() {
        for ok in ["email_api_key", "k", "a1_b2"] {
            assert!(check_secret_name("name", ok).is_ok(), "{ok}");
        }
        for bad in ["", "1abc", "_a", "a-b", "Key", "a.b"] {
            assert!(check_secret_name("name", bad).is_err(), "{bad}");
        }
    }
}
