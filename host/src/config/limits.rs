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
