//! How an attempt ended, before it is written down ([`Outcome`]), what it says about the
//! receiver ([`ReceiverSign`]), the log lines it keeps ([`Logs`]), and the outcome a
//! classifier's verdict makes of it ([`classified`]), and the write that ends the attempt
//! ([`attempt_finish`]).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::classify::Judgement;
use crate::contract::Verdict;
use crate::domain::{AttemptErrorType, AttemptStatus, ExecutionStatus};
use crate::flow::Health;
use crate::retry::RetryPolicy;
use crate::secret::redact::Redactor;
use crate::secret::SecretValue;
use crate::store::{now, AttemptFinish, Execution, LogWrite, StoreError};

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

/// The write that ends the attempt: SUCCESS, RETRYING with the next run time, FAILED or
/// CANCELLED; secrets taken out of everything it stores.
#[allow(clippy::too_many_arguments)]
pub(super) fn attempt_finish(
    execution: &Execution,
    outcome: Outcome,
    policy: &RetryPolicy,
    secrets: &[SecretValue],
    started_at: DateTime<Utc>,
    completed_at: DateTime<Utc>,
    duration_ms: i32,
    mut logs: Logs,
) -> AttemptFinish {
    let attempt = execution.attempt_count;
    let base = |execution_status, attempt_status, output, error, retry_at| AttemptFinish {
        execution_id: execution.execution_id.clone(),
        attempt_number: attempt,
        execution_status,
        attempt_status,
        output,
        error,
        started_at,
        completed_at,
        duration_ms,
        retry_at,
        logs: Vec::new(),
        endpoint: execution.endpoint.clone(),
        health: None,
        concurrency_key: execution.concurrency_key.clone(),
    };
    let mut finish = match outcome {
        Outcome::Delivered { output } => AttemptFinish {
            health: Some(Health::Up),
            ..base(ExecutionStatus::Success, AttemptStatus::Success, Some(output), None, None)
        },
        Outcome::Aborted { error } => {
            let output = json!({ "error": error.clone() });
            base(ExecutionStatus::Cancelled, AttemptStatus::Cancelled, Some(output), Some(error), None)
        }
        Outcome::NotSent { error } => {
            let delay = policy.next_delay_ms(attempt.max(1) as u32, None, &mut rand::thread_rng());
            logs.push("INFO", format!("Retrying in {delay} ms; this attempt sent nothing."));
            let retry_at = completed_at + chrono::Duration::milliseconds(delay as i64);
            base(ExecutionStatus::Retrying, AttemptStatus::Failed, None, Some(error), Some(retry_at))
        }
        Outcome::Failed { error, retryable, retry_after_ms, message, receiver } => {
            let health = match receiver {
                ReceiverSign::None => None,
                ReceiverSign::Down => Some(Health::Down(message.clone())),
                ReceiverSign::Trip(cooldown_ms) => Some(Health::Trip { error: message.clone(), cooldown_ms }),
            };
            let delay = policy.next_delay_ms(attempt as u32, retry_after_ms, &mut rand::thread_rng());
            let retry_at = completed_at + chrono::Duration::milliseconds(delay as i64);
            let deadline = policy.deadline(execution.due_at());
            let in_time = deadline.is_none_or(|deadline| retry_at <= deadline);
            let mut finish = if retryable && attempt < execution.max_attempts && in_time {
                logs.push(
                    "INFO",
                    format!("Retrying in {delay} ms (attempt {} of {}).", attempt + 1, execution.max_attempts),
                );
                base(ExecutionStatus::Retrying, AttemptStatus::Failed, None, Some(error), Some(retry_at))
            } else {
                // Attempts were left, but the next would start past the deadline: the
                // execution fails for that, the attempt for its own error.
                let late = retryable && attempt < execution.max_attempts;
                let why = match (retryable, late) {
                    (false, _) => "not retryable".to_owned(),
                    (true, true) => "the next attempt would start after retry_policy.max_age_ms".to_owned(),
                    (true, false) => format!("no attempts left ({attempt} of {})", execution.max_attempts),
                };
                logs.push("ERROR", format!("Execution failed, {why}: {message}"));
                let output = match late {
                    true => {
                        json!({ "error": { "type": AttemptErrorType::DeadlineExceeded, "message": format!("Execution failed: {why}."), "retryable": false, "last_error": error.clone() } })
                    }
                    false => json!({ "error": error.clone() }),
                };
                base(ExecutionStatus::Failed, AttemptStatus::Failed, Some(output), Some(error), None)
            };
            finish.health = health;
            finish
        }
    };
    finish.logs = logs.0;
    // The one place secrets are taken out of what is stored: the output, the error and
    // every log line, in any form a receiver may have echoed them (see `secret::redact`).
    let redactor = Redactor::new(secrets);
    for document in [&mut finish.output, &mut finish.error].into_iter().flatten() {
        redactor.redact_value(document);
    }
    for log in &mut finish.logs {
        log.message = redactor.redact(&log.message);
    }
    if let Some(message) = finish.health.as_mut().and_then(Health::error_mut) {
        *message = redactor.redact(message);
    }
    finish
}
