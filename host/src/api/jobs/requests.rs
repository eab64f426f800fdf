//! What the jobs routes accept: bodies and query parameters.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use crate::domain::Trigger;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobIn {
    pub endpoint: String,
    pub trigger: Trigger,
    pub idempotency_key: Option<String>,
    pub input: Option<Value>,
    pub run_at: Option<DateTime<Utc>>,
    /// For a DELAYED job, instead of `run_at`: fire this many milliseconds after the create.
    pub delay_ms: Option<u64>,
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

/// `PUT /jobs/{id}`: what changes in the cron job's next version; absent fields carry over.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobUpdateIn {
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub input: Option<Value>,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobListParams {
    pub endpoint: Option<String>,
    pub status: Option<String>,
    pub trigger: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionListParams {
    pub status: Option<String>,
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}
