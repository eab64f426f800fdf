//! An endpoint's classifier: a plugin (world `classifier-plugin`) that judges the receiver's
//! answer after the transport has, and may overrule it — success, retry after a delay,
//! permanent failure, or open the endpoint's circuit. For receivers that answer 200 with an
//! error in the body, or say "slow down" in headers of their own.
//!
//! A classifier that gives no verdict (it traps, runs past its CPU budget, or cannot be
//! loaded) leaves the transport's verdict standing, with a warning in the attempt's logs: a
//! delivered message is never sent again because its classifier broke.

use std::time::Duration;

use serde_json::{json, Value};

use crate::contract::{Answer, Failure, Receipt, Verdict};
use crate::domain::{AttemptErrorType, EndpointType};
use crate::plugin::{PluginHost, PluginRef};
use crate::transport::{Delivery, ReceiverAnswer};

/// The CPU time one classification may take. A classifier reads a bounded answer and decides;
/// it has no network to wait on.
pub const CLASSIFY_CPU: Duration = Duration::from_millis(500);

/// What a classifier decided about one attempt, with what is needed to record it.
pub struct Judgement {
    /// `name@version` of the classifier that decided.
    pub by: String,
    pub verdict: Verdict,
    /// The receiver's status, when it answered over HTTP.
    pub status: Option<u16>,
    /// What a success overruling the transport's failure records as its output (None when
    /// the transport succeeded: its receipt is the output).
    pub output_if_failed: Option<Value>,
}

impl Judgement {
    /// The error an attempt records when the classifier failed it.
    pub fn error_json(&self, verdict: &str, message: &str, retryable: bool) -> Value {
        let mut error = json!({
            "type": AttemptErrorType::ClassifiedFailure,
            "verdict": verdict,
            "message": message,
            "retryable": retryable,
            "classifier": self.by,
        });
        if let Some(status) = self.status {
            error["status_code"] = json!(status);
        }
        error
    }
}

/// Ask `classifier` about one attempt's answer. None: it gave no verdict (the reason is in
/// `delivery`'s lines), and the transport's verdict stands.
pub async fn judge(
    plugins: &PluginHost,
    classifier: &PluginRef,
    config: Option<&Value>,
    endpoint_type: EndpointType,
    attempt: u32,
    delivered: &Result<Receipt, Failure>,
    delivery: &Delivery,
) -> Option<Judgement> {
    let plugin = match plugins.get(classifier).await {
        Ok(plugin) => plugin,
        Err(error) => {
            delivery.push(
                "WARN",
                format!("Classifier {classifier} could not be loaded ({error}); the transport's verdict stands."),
            );
            return None;
        }
    };
    let by = format!("{}@{}", plugin.record.name, plugin.record.version);
    let answer = delivery.take_answer().unwrap_or_default();
    let output_if_failed = delivered
        .is_err()
        .then(|| json!({ "status_code": answer.status, "body": String::from_utf8_lossy(&answer.body) }));
    let status = answer.status;
    let ReceiverAnswer { status: _, headers, body } = answer;
    let call = Answer {
        endpoint_type: endpoint_type.as_str().to_owned(),
        attempt,
        status,
        headers,
        body,
        outcome: delivered.as_ref().map(|r| r.output_json.clone()).map_err(Clone::clone),
        config_json: config.map_or_else(|| "{}".to_owned(), Value::to_string),
    };
    let outcome = plugins.runtime.classify(&plugin.loaded, &plugin.limits, call, CLASSIFY_CPU).await;
    crate::metrics::plugin_call(&plugin.record.name, outcome.result.is_err(), false);
    for (level, line) in &outcome.logs.records {
        delivery.push(level, format!("[classifier {}] {line}", plugin.record.name));
    }
    let verdict = match outcome.result {
        Ok(verdict) => verdict,
        Err(why) => {
            delivery.push("WARN", format!("Classifier {by} gave no verdict ({why}); the transport's verdict stands."));
            return None;
        }
    };
    delivery.push("INFO", format!("Classifier {by}: {}.", describe(&verdict)));
    Some(Judgement { by, verdict, status, output_if_failed })
}

/// A verdict in words, for the attempt's logs.
fn describe(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Keep => "keep the transport's verdict".to_owned(),
        Verdict::Success => "success".to_owned(),
        Verdict::Retry(retry) => match retry.after_ms {
            Some(ms) => format!("retry after {ms} ms: {}", retry.message),
            None => format!("retry: {}", retry.message),
        },
        Verdict::Permanent(message) => format!("permanent failure: {message}"),
        Verdict::OpenCircuit(open) => match open.cooldown_ms {
            Some(ms) => format!("open the circuit for {ms} ms: {}", open.message),
            None => format!("open the circuit: {}", open.message),
        },
    }
}
