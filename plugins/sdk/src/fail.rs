//! The failures the host understands. `retryable` decides whether the host tries again (while
//! the endpoint's retry policy has attempts left), and counts against the endpoint's circuit
//! breaker; a permanent failure says the message cannot be delivered as it is.

use crate::{Failure, FailureKind};

fn failure(kind: FailureKind, retryable: bool, message: impl Into<String>) -> Failure {
    Failure { kind, retryable, message: message.into(), retry_after_ms: None }
}

/// The rendered spec cannot be delivered (never retried). Name the field.
pub fn invalid_spec(message: impl Into<String>) -> Failure {
    failure(FailureKind::InvalidSpec, false, message)
}

/// The receiver could not be reached; another attempt may succeed.
pub fn connection(message: impl Into<String>) -> Failure {
    failure(FailureKind::Connection, true, message)
}

/// The deadline passed before the receiver answered; retried.
pub fn timeout(message: impl Into<String>) -> Failure {
    failure(FailureKind::Timeout, true, message)
}

/// The receiver answered and refused, with `status` when it has one.
pub fn rejected(status: Option<u16>, retryable: bool, message: impl Into<String>) -> Failure {
    failure(FailureKind::Rejected(status), retryable, message)
}

/// The plugin itself failed (a bug, an impossible state); not retried.
pub fn internal(message: impl Into<String>) -> Failure {
    failure(FailureKind::Internal, false, message)
}

/// `failure`, asking for a retry after `ms` milliseconds (the host uses it in place of the
/// backoff, capped by the retry policy).
pub fn retry_after(mut failure: Failure, ms: u64) -> Failure {
    failure.retry_after_ms = Some(ms);
    failure
}
