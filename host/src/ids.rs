//! Ids: opaque strings with a type prefix (`job_…`, `exec_…`, `att_…`, `log_…`), so an id in a
//! log line or a support ticket says what it names.

pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

pub const JOB: &str = "job";
pub const EXECUTION: &str = "exec";
pub const ATTEMPT: &str = "att";
pub const LOG: &str = "log";
