//! Bounds on what a key holder's input may cost the service: payload specs, the validation of
//! job input against them, and what rendering an endpoint's templates may build.

use std::time::Duration;

use clap::Args;

use crate::api::schema_limits::SchemaLimits;
use crate::api::validators::Validators;

#[derive(Debug, Args)]
#[command(next_help_heading = "Input limits")]
pub struct InputLimitArgs {
    /// Subschemas a payload spec may have once every `$ref` in it is expanded; a larger spec is
    /// refused (422 INVALID_SCHEMA naming where it grows).
    #[arg(long, env = "TE_SCHEMA_MAX_SUBSCHEMAS", value_name = "TE_SCHEMA_MAX_SUBSCHEMAS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(10..=1_000_000))]
    pub schema_max_subschemas: u64,

    /// How deep allOf/anyOf/oneOf/not/if may nest in a payload spec, counted through `$ref`s;
    /// deeper is refused (422 INVALID_SCHEMA).
    #[arg(long, env = "TE_SCHEMA_MAX_COMBINATOR_DEPTH", value_name = "TE_SCHEMA_MAX_COMBINATOR_DEPTH",
          default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub schema_max_combinator_depth: u64,

    /// Milliseconds one job's input may take to validate against its payload spec; longer is
    /// refused (422 INPUT_VALIDATION_FAILED saying so).
    #[arg(long, env = "TE_VALIDATION_TIMEOUT_MS", value_name = "TE_VALIDATION_TIMEOUT_MS", default_value_t = 2_000,
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub validation_timeout_ms: u64,

    /// Bytes of values one render of an endpoint's templates may build (strings, lists), all
    /// together; past it the delivery fails with TEMPLATE_TOO_LARGE, not retried.
    #[arg(long, env = "TE_RENDER_MAX_BUILD_BYTES", value_name = "TE_RENDER_MAX_BUILD_BYTES",
          default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(65_536..=1_073_741_824))]
    pub render_max_build_bytes: u64,
}

impl InputLimitArgs {
    pub fn render_build_bytes(&self) -> usize {
        usize::try_from(self.render_max_build_bytes).unwrap_or(usize::MAX)
    }

    pub fn validators(&self) -> Validators {
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Validators::new(
            SchemaLimits {
                max_subschemas: count(self.schema_max_subschemas),
                max_combinator_depth: count(self.schema_max_combinator_depth),
            },
            Duration::from_millis(self.validation_timeout_ms),
        )
    }
}

/// The server-wide defaults of the tenants' quotas: each holds for every tenant that has no
/// limit of its own (`PATCH /tenants/{tenant}`); unset, none.
#[derive(Debug, Args)]
#[command(next_help_heading = "Tenant quotas (defaults)")]
pub struct QuotaArgs {
    /// Jobs a tenant may create a second, with a burst of as many (429 RATE_LIMITED with
    /// Retry-After past it).
    #[arg(long, env = "TE_QUOTA_CREATES_PER_SECOND", value_name = "TE_QUOTA_CREATES_PER_SECOND",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub quota_creates_per_second: Option<u32>,

    /// CRON jobs a tenant may have active at once (429 QUOTA_EXCEEDED past it).
    #[arg(long, env = "TE_QUOTA_ACTIVE_CRON_JOBS", value_name = "TE_QUOTA_ACTIVE_CRON_JOBS")]
    pub quota_active_cron_jobs: Option<u32>,

    /// The shortest time, in seconds, between two ticks of a tenant's CRON job.
    #[arg(long, env = "TE_QUOTA_MIN_CRON_INTERVAL_SEC", value_name = "TE_QUOTA_MIN_CRON_INTERVAL_SEC")]
    pub quota_min_cron_interval_sec: Option<u32>,

    /// Executions a tenant may have unfinished (PENDING, QUEUED, RUNNING, RETRYING) at once.
    #[arg(long, env = "TE_QUOTA_UNFINISHED_EXECUTIONS", value_name = "TE_QUOTA_UNFINISHED_EXECUTIONS")]
    pub quota_unfinished_executions: Option<u64>,

    /// Endpoints a tenant may have.
    #[arg(long, env = "TE_QUOTA_ENDPOINTS", value_name = "TE_QUOTA_ENDPOINTS")]
    pub quota_endpoints: Option<u32>,

    /// Bytes of one job's `input`, as JSON.
    #[arg(long, env = "TE_QUOTA_MAX_INPUT_BYTES", value_name = "TE_QUOTA_MAX_INPUT_BYTES")]
    pub quota_max_input_bytes: Option<u32>,
}

impl QuotaArgs {
    pub fn defaults(&self) -> crate::domain::quotas::Quotas {
        crate::domain::quotas::Quotas {
            creates_per_second: self.quota_creates_per_second,
            active_cron_jobs: self.quota_active_cron_jobs,
            min_cron_interval_sec: self.quota_min_cron_interval_sec,
            unfinished_executions: self.quota_unfinished_executions,
            endpoints: self.quota_endpoints,
            max_input_bytes: self.quota_max_input_bytes,
        }
    }
}
