//! The engine's vocabulary as types: execution, attempt and job statuses, triggers and endpoint
//! types. Each is stored as the TEXT docs/api.md names (`"PENDING"`, `"CRON"`, …), written in
//! JSON the same way, and read back strictly: a value no variant names is an error, never a
//! silent default.

mod plugin_ref;
pub mod quotas;
pub mod tenant;

use std::fmt;
use std::str::FromStr;

pub use plugin_ref::PluginRef;
pub use tenant::{Scope, DEFAULT_TENANT};

/// A stored or received name that no variant has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} '{value}' is unknown (one of: {expected})")]
pub struct UnknownName {
    pub kind: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// What every type stored as TEXT shares: its sqlx `Type` (whatever `str` is on the backend,
/// with PostgreSQL arrays) and `Decode` through its `FromStr`. Each type writes its own
/// `Encode`: a name's text is `'static`, an id's is owned.
macro_rules! sql_text_type {
    ($name:ty) => {
        impl<DB: sqlx::Database> sqlx::Type<DB> for $name
        where
            str: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $name
        where
            &'r str: sqlx::Decode<'r, DB>,
        {
            fn decode(value: <DB as sqlx::Database>::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                Ok(<&'r str as sqlx::Decode<'r, DB>>::decode(value)?.parse()?)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }
    };
}
pub(crate) use sql_text_type;

/// An enum of fixed names, stored as TEXT on every backend: `as_str`, `FromStr`, `Display`,
/// serde, and sqlx's `Type`/`Encode`/`Decode` for any database that stores `&str` (with
/// PostgreSQL arrays), so rows and binds carry the enum itself.
macro_rules! text_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident ($kind:literal) { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownName {
                        kind: $kind,
                        value: s.to_owned(),
                        expected: concat!($($text, " "),+).trim_ascii_end(),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $name
        where
            &'q str: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&'q str as sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        $crate::domain::sql_text_type!($name);
    };
}

text_enum! {
    /// Where an execution is in its life: PENDING → QUEUED → RUNNING → SUCCESS | RETRYING → … |
    /// FAILED, and CANCELLED from PENDING, QUEUED or RETRYING.
    pub enum ExecutionStatus ("execution status") {
        /// Waits for its `run_at` (a delayed job, a cron tick made ahead).
        Pending => "PENDING",
        /// Claimable now.
        Queued => "QUEUED",
        /// Held by a worker under a lease.
        Running => "RUNNING",
        /// Failed an attempt; claimable again at its `run_at`.
        Retrying => "RETRYING",
        Success => "SUCCESS",
        Failed => "FAILED",
        Cancelled => "CANCELLED",
    }
}

text_enum! {
    /// What an API key issued to a tenant may do (`POST /tenants/{tenant}/api-keys`). Operator
    /// keys (`TE_API_KEYS`) have no role: they may do everything, in every tenant.
    pub enum KeyRole ("key role") {
        /// Everything within its tenant, its API keys included.
        Admin => "admin",
        /// Everything within its tenant but its API keys.
        Write => "write",
        /// GET alone.
        Read => "read",
    }
}

impl ExecutionStatus {
    /// SUCCESS, FAILED or CANCELLED: nothing will happen to it any more.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Success | Self::Failed | Self::Cancelled)
    }
}

text_enum! {
    /// How one attempt ended.
    pub enum AttemptStatus ("attempt status") {
        Success => "SUCCESS",
        Failed => "FAILED",
        /// Stopped in flight by an abort (`cancel?running=abort`): never retried.
        Cancelled => "CANCELLED",
        /// In flight: shown by the API from its execution, never stored.
        Running => "RUNNING",
    }
}

text_enum! {
    /// The `type` of the error an attempt records (docs/api.md, "Executions"): what the
    /// transport's failure was, or why the attempt ended before or without a delivery.
    pub enum AttemptErrorType ("attempt error type") {
        /// The delivery did not finish within its `timeout_ms`.
        Timeout => "TIMEOUT",
        /// The destination could not be reached.
        ConnectionError => "CONNECTION_ERROR",
        /// The rendered spec is not one the transport can send.
        InvalidSpec => "INVALID_SPEC",
        /// The transport failed on its own side.
        InternalError => "INTERNAL_ERROR",
        /// A refusal by a transport that names none of its own.
        Rejected => "REJECTED",
        /// The receiver answered with a status outside `expected_status_codes` (`status_code`).
        HttpError => "HTTP_ERROR",
        /// The Kafka broker refused the record (`code`).
        BrokerError => "BROKER_ERROR",
        /// Redis refused the stream entry.
        StreamError => "STREAM_ERROR",
        /// A transport plugin reported the refusal (`code` when it gave one).
        PluginError => "PLUGIN_ERROR",
        /// The endpoint's classifier failed an attempt the transport counted a success or
        /// another failure (`verdict`).
        ClassifiedFailure => "CLASSIFIED_FAILURE",
        /// A template read a value that is not there (`variable`).
        TemplateResolutionFailed => "TEMPLATE_RESOLUTION_FAILED",
        /// The render built more than `TE_RENDER_MAX_BUILD_BYTES`.
        TemplateTooLarge => "TEMPLATE_TOO_LARGE",
        /// The endpoint was deleted before the attempt could read it.
        EndpointNotFound => "ENDPOINT_NOT_FOUND",
        /// A secret the spec reads may not be sent to its destination.
        SecretHostNotAllowed => "SECRET_HOST_NOT_ALLOWED",
        /// The execution was reclaimed or cancelled before delivery; nothing was sent.
        LeaseLost => "LEASE_LOST",
        /// The worker holding the attempt stopped renewing its lease; the execution was reclaimed.
        WorkerLost => "WORKER_LOST",
        /// The database failed before anything was sent.
        StoreUnavailable => "STORE_UNAVAILABLE",
        /// The attempt's result could not be stored in full; its status was kept.
        ResultUnstorable => "RESULT_UNSTORABLE",
        /// The execution was due longer ago than its `retry_policy.max_age_ms`: no attempt
        /// was made, or no further one will be.
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        /// `POST /executions/{id}/cancel?running=abort` stopped the delivery in flight (the
        /// connection dropped); the execution is CANCELLED, never retried.
        Aborted => "ABORTED",
    }
}

text_enum! {
    /// A job is ACTIVE until it is cancelled, replaced by a new version, or (one-shot) done.
    pub enum JobStatus ("job status") {
        Active => "ACTIVE",
        Retired => "RETIRED",
    }
}

text_enum! {
    /// What a CRON job does with a tick that comes while an earlier execution of it is still
    /// unfinished (queued, running or waiting to retry).
    pub enum OverlapPolicy ("overlap policy") {
        /// Fire anyway: executions of the job may run side by side.
        Allow => "allow",
        /// Skip the tick: its execution is CANCELLED, saying why.
        Skip => "skip",
        /// Hold one tick until the earlier execution finishes, then fire it; skip any further.
        BufferOne => "buffer_one",
    }
}

text_enum! {
    /// Which of a CRON job's missed ticks are made up (missed: the scheduler was down or behind,
    /// or the job was paused and resumed with `catch_up`).
    pub enum CatchupPolicy ("catchup policy") {
        /// Every missed tick (within the job's `catchup_window`, when it has one).
        All => "all",
        /// Only the newest of the ticks that are due at once.
        Latest => "latest",
        /// None: a tick more than the `catchup_window` (default 60 s) late is skipped.
        None => "none",
    }
}

text_enum! {
    /// When a job fires.
    pub enum Trigger ("trigger") {
        /// Now.
        Immediate => "IMMEDIATE",
        /// At its `run_at`.
        Delayed => "DELAYED",
        /// On every tick of its cron schedule.
        Cron => "CRON",
    }
}

text_enum! {
    /// Why an execution was made.
    pub enum TriggerReason ("trigger reason") {
        /// Its job's own time: a one-shot job's fire, or a CRON job's tick.
        Scheduled => "scheduled",
        /// `POST /jobs/{id}/trigger`: a CRON job fired now, outside its schedule.
        Manual => "manual",
        /// `POST /jobs/{id}/backfill`: a tick of a past range, made after its time.
        Backfill => "backfill",
        /// `POST /executions/{id}/retry` or `/executions/replay`: a finished execution again.
        Retry => "retry",
    }
}

text_enum! {
    /// The kinds of delivery target an endpoint can be.
    pub enum EndpointType ("endpoint type") {
        Http => "HTTP",
        Kafka => "KAFKA",
        RedisStream => "REDIS_STREAM",
        /// Delivered by a WebAssembly transport plugin the endpoint names.
        Plugin => "PLUGIN",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/api.md's table of attempt error types lists every type an attempt records.
    #[test]
    fn the_attempt_error_types_are_the_documented_ones() {
        let doc = include_str!("../../../docs/api.md");
        let table = doc.split("#### Attempt error types").nth(1).expect("docs/api.md lists the attempt error types");
        let documented: Vec<&str> = table
            .lines()
            .skip_while(|line| !line.starts_with('|'))
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.split('`').nth(1))
            .collect();
        let in_code: Vec<&str> = AttemptErrorType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            documented.iter().collect::<std::collections::BTreeSet<_>>(),
            in_code.iter().collect::<std::collections::BTreeSet<_>>()
        );
        assert_eq!(documented.len(), in_code.len(), "each type once");
    }

    #[test]
    fn names_round_trip_through_text_and_json() {
        for s in ExecutionStatus::ALL {
            assert_eq!(s.as_str().parse::<ExecutionStatus>(), Ok(*s));
            assert_eq!(serde_json::to_value(s).unwrap(), serde_json::json!(s.as_str()));
        }
        for t in Trigger::ALL {
            assert_eq!(serde_json::from_value::<Trigger>(serde_json::json!(t.as_str())).unwrap(), *t);
        }
        let err = "DONE".parse::<ExecutionStatus>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "execution status 'DONE' is unknown (one of: PENDING QUEUED RUNNING RETRYING SUCCESS FAILED CANCELLED)"
        );
        assert!(err.expected.contains("PENDING") && err.expected.contains("CANCELLED"));
    }
}
