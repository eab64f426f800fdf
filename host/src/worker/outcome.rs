//! How an attempt ended, before it is written down ([`Outcome`]), what it says about the
//! receiver ([`ReceiverSign`]), the log lines it keeps ([`Logs`]), and the outcome a
//! classifier's verdict makes of it ([`classified`]).

use serde_json::{json, Value};

use super::classify::Judgement;
use crate::contract::Verdict;
use crate::domain::{AttemptErrorType, ExecutionStatus};
use crate::store::{now, LogWrite, StoreError};

/// What a failed attempt says about the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReceiverSign {
    /// Nothing: the failure is about the message (a permanent refusal, a template).
    None,
    /// It failed in a way that may pass (a retryable failure): counted by the circuit breaker.
    Down,
    /// It is unwell, says its classifier: the circuit opens now (for this long, when given).
    Trip(Option<u64>),
}

/// How an attempt ended, before it is written down.
pub(super) enum Outcome {
    Delivered {
        output: Value,
    },
    Failed {
        error: Value,
        retryable: bool,
        retry_after_ms: Option<u64>,
        message: String,
        /// What the failure says about the receiver, for the endpoint's circuit breaker.
        receiver: ReceiverSign,
    },
    /// Stopped before anything was sent (the store failed): retried whatever attempts are
    /// left, since the receiver never saw this one.
    NotSent {
        error: Value,
    },
    /// Stopped in flight by an abort (`super::abort`): the attempt and the execution CANCELLED.
    Aborted {
        error: Value,
    },
}

impl Outcome {
    /// The database failed before anything was sent. Recorded as a retryable failure: the
    /// completer retries the write until the database answers, so the execution is never left
    /// RUNNING with nobody to finish it.
    pub(super) fn store_failed(error: &StoreError, logs: &mut Logs) -> Self {
        tracing::warn!(%error, "Attempt stopped before delivery: the store failed.");
        let message = format!("The database could not be read before delivery ({error}); nothing was sent.");
        logs.push("WARN", message.clone());
        let error_json = json!({ "type": AttemptErrorType::StoreUnavailable, "message": message, "retryable": true });
        if error.is_transient() {
            Self::NotSent { error: error_json }
        } else {
            // The same read would fail again: count it like any failed attempt.
            Self::Failed {
                error: error_json,
                retryable: true,
                retry_after_ms: None,
                message,
                receiver: ReceiverSign::None,
            }
        }
    }

    /// The delivery was dropped where it was, as an abort asked (`cancel?running=abort`).
    pub(super) fn aborted(logs: &mut Logs) -> Self {
        let message =
            "Aborted in flight, as asked (cancel?running=abort): the delivery was stopped and will not be retried.";
        logs.push("WARN", message.to_owned());
        Self::Aborted { error: json!({ "type": AttemptErrorType::Aborted, "message": message, "retryable": false }) }
    }

    /// A failure the endpoint's definition causes (missing endpoint, unresolvable template):
    /// never retried.
    pub(super) fn permanent(kind: AttemptErrorType, message: String) -> Self {
        Self::Failed {
            error: json!({ "type": kind, "message": message, "retryable": false }),
            retryable: false,
            retry_after_ms: None,
            message,
            receiver: ReceiverSign::None,
        }
    }
}

pub(super) struct Logs(pub(super) Vec<LogWrite>);

impl Logs {
    /// Each line a microsecond after the one before at least: lines are listed in time order,
    /// and lines pushed in the same microsecond (a plugin's records, copied in after its call)
    /// would otherwise be ordered by their random ids.
    pub(super) fn push(&mut self, level: &'static str, message: String) {
        let at = now();
        let logged_at = match self.0.last() {
            Some(last) if at <= last.logged_at => last.logged_at + chrono::Duration::microseconds(1),
            _ => at,
        };
        self.0.push(LogWrite { level, message, logged_at });
    }

    /// Add `text` to the first line (the attempt's start).
    pub(super) fn append_to_first(&mut self, text: &str) {
        if let Some(first) = self.0.first_mut() {
            first.message.push_str(text);
        }
    }

    /// The attempt's last word, at INFO: on its first line when nothing was said since (a
    /// plain successful delivery is then one row, not two: log rows were an eighth of the
    /// database's time per delivery), else on a line of its own, so lines read in order.
    pub(super) fn say_last(&mut self, message: String) {
        match self.0.as_mut_slice() {
            [only] => {
                only.message.push(' ');
                only.message.push_str(&message);
            }
            _ => self.push("INFO", message),
        }
    }
}

/// The outcome a classifier's verdict makes of an attempt: a failure it decided, or a success
/// over the transport's failure.
pub(super) fn classified(judgement: Judgement, elapsed_ms: u128, logs: &mut Logs) -> Outcome {
    let (verdict, message, retryable, retry_after_ms, receiver) = match judgement.verdict.clone() {
        // A success over the transport's failure (over its success, the receipt stands).
        Verdict::Keep | Verdict::Success => {
            logs.push("INFO", format!("Delivered in {elapsed_ms} ms, says classifier {}.", judgement.by));
            return Outcome::Delivered { output: judgement.output_if_failed.unwrap_or_default() };
        }
        Verdict::Retry(retry) => ("retry", retry.message, true, retry.after_ms, ReceiverSign::Down),
        Verdict::Permanent(message) => ("permanent", message, false, None, ReceiverSign::None),
        Verdict::OpenCircuit(open) => ("open_circuit", open.message, true, None, ReceiverSign::Trip(open.cooldown_ms)),
    };
    let message: String = message.chars().take(4096).collect();
    logs.push("WARN", format!("Delivery failed after {elapsed_ms} ms, says classifier {}: {message}", judgement.by));
    Outcome::Failed {
        error: judgement.error_json(verdict, &message, retryable),
        retryable,
        retry_after_ms,
        message,
        receiver,
    }
}

/// An attempt's outcome in the metrics, once it is recorded.
pub(super) fn record_metrics(execution: &crate::store::Execution, status: ExecutionStatus, error_type: &str) {
    let outcome = match status {
        ExecutionStatus::Success => "success",
        ExecutionStatus::Cancelled => "aborted",
        _ => "failure",
    };
    crate::metrics::attempt(outcome, error_type);
    if matches!(status, ExecutionStatus::Success | ExecutionStatus::Failed) {
        crate::metrics::execution_finished(status.as_str(), execution.endpoint_type.as_str(), &execution.endpoint);
    }
}
