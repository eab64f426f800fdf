//! The `Idempotency-Key` request header on `POST /jobs` and `POST /jobs/batch`: the body's
//! `idempotency_key` given the way Stripe, QStash and the IETF draft
//! (`draft-ietf-httpapi-idempotency-key-header`) give it, so a client that sets the header on
//! every create gets the same once-only answer without a body field.
//!
//! - `POST /jobs`: the header is the job's key. A body that names a key too must name the same
//!   one; two different keys are a `400` naming both.
//! - `POST /jobs/batch`: the header keys the request; job `i` of the batch takes the key
//!   `{header}:{i}`, so the same batch sent again answers every job `existing`. A job of such a
//!   batch that names its own key is a `400` naming it: one way of keying a batch at a time.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::MAX_IDEMPOTENCY_KEY_LEN;
use crate::api::error::ApiError;

/// The header's name, as the API's errors and docs give it.
pub const HEADER: &str = "Idempotency-Key";

/// The longest header a batch takes: its jobs' keys add `:` and an index below 1,000.
const MAX_BATCH_HEADER_LEN: usize = MAX_IDEMPOTENCY_KEY_LEN - 4;

/// The request's `Idempotency-Key`, if it sent one (checked: one value, text, 1 to 255
/// characters).
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let mut values = parts.headers.get_all(HEADER).iter();
        let Some(value) = values.next() else { return Ok(Self(None)) };
        if values.next().is_some() {
            return Err(ApiError::invalid_field(HEADER, "is sent more than once; send one key"));
        }
        let key = value.to_str().map_err(|_| ApiError::invalid_field(HEADER, "must be visible ASCII text"))?;
        if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(ApiError::invalid_field(HEADER, format!("must be 1-{MAX_IDEMPOTENCY_KEY_LEN} characters")));
        }
        Ok(Self(Some(key.to_owned())))
    }
}

impl IdempotencyKey {
    /// The key of a single create: the body's and the header's, which must agree.
    pub fn for_job(&self, body: Option<String>) -> Result<Option<String>, ApiError> {
        match (&self.0, body) {
            (Some(header), Some(body)) if *header != body => Err(ApiError::invalid_field(
                "idempotency_key",
                format!("is '{body}' but the {HEADER} header is '{header}': send one key, or the same in both"),
            )),
            (Some(header), _) => Ok(Some(header.clone())),
            (None, body) => Ok(body),
        }
    }

    /// Checked before a batch's jobs are: the header leaves room for their indexes.
    pub fn check_batch(&self) -> Result<(), ApiError> {
        match &self.0 {
            Some(header) if header.len() > MAX_BATCH_HEADER_LEN => Err(ApiError::invalid_field(
                HEADER,
                format!(
                    "must be 1-{MAX_BATCH_HEADER_LEN} characters on a batch (each job's key adds `:` and its index)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The key of job `index` of a batch: `{header}:{index}`; a job that names its own key
    /// while the header is sent is refused (`jobs[index].idempotency_key`).
    pub fn for_batch_job(&self, index: usize, body: Option<String>) -> Result<Option<String>, ApiError> {
        match (&self.0, body) {
            (Some(_), Some(_)) => Err(ApiError::invalid_field(
                &format!("jobs[{index}].idempotency_key"),
                format!("is given while the {HEADER} header keys the batch: key the jobs one way"),
            )),
            (Some(header), None) => Ok(Some(format!("{header}:{index}"))),
            (None, body) => Ok(body),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(header: Option<&str>) -> IdempotencyKey {
        IdempotencyKey(header.map(str::to_owned))
    }

    #[test]
    fn a_single_create_takes_either_key_or_both_when_they_agree() {
        assert_eq!(key(None).for_job(Some("a".into())).unwrap(), Some("a".into()));
        assert_eq!(key(Some("h")).for_job(None).unwrap(), Some("h".into()));
        assert_eq!(key(Some("h")).for_job(Some("h".into())).unwrap(), Some("h".into()));
        assert_eq!(key(None).for_job(None).unwrap(), None);
        let refused = key(Some("h")).for_job(Some("b".into())).unwrap_err();
        assert!(
            refused.message.contains("`idempotency_key`") && refused.message.contains(HEADER),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_batch_keys_its_jobs_by_index_and_refuses_a_second_way() {
        assert_eq!(key(Some("h")).for_batch_job(7, None).unwrap(), Some("h:7".into()));
        assert_eq!(key(None).for_batch_job(7, Some("own".into())).unwrap(), Some("own".into()));
        let refused = key(Some("h")).for_batch_job(3, Some("own".into())).unwrap_err();
        assert!(refused.message.contains("`jobs[3].idempotency_key`"), "{}", refused.message);
        let longest = "k".repeat(MAX_BATCH_HEADER_LEN);
        assert!(key(Some(&longest)).check_batch().is_ok());
        assert_eq!(format!("{longest}:999").len(), MAX_IDEMPOTENCY_KEY_LEN);
        assert!(key(Some(&format!("{longest}k"))).check_batch().is_err());
    }
}
