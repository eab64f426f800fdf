//! Payload-spec validation of job input: compiled JSON Schema validators, cached per spec name
//! and `updated_at`, and the check that answers 422 listing the failing paths.
//!
//! Validation is bounded whatever the spec: specs are held to [`SchemaLimits`] when created,
//! `pattern` and `patternProperties` use the `regex` crate (linear time; no look-around or
//! back-references, refused when the spec is created), at most [`MAX_FAILURES`] failures are
//! gathered, and the check runs on the blocking pool, a few at a time, under a time budget
//! (`TE_VALIDATION_TIMEOUT_MS`): past it the create is refused with 422, and no runtime thread
//! was held meanwhile.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::api::schema_limits::SchemaLimits;
use crate::store::Store;

/// Failures listed in one 422 at most; the message says when there were more.
pub const MAX_FAILURES: usize = 50;

/// How every payload spec is compiled: regular expressions on the linear-time `regex` engine,
/// with a bound on a compiled expression's size.
pub fn options() -> jsonschema::ValidationOptions {
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(1 << 20).dfa_size_limit(1 << 20))
}

/// Check `input` against the endpoint's payload spec; 422 listing the failing paths.
pub async fn validate_input(
    store: &dyn Store,
    validators: &Validators,
    payload_spec: Option<&str>,
    input: &Value,
) -> ApiResult<()> {
    let Some(name) = payload_spec else { return Ok(()) };
    let Some(spec) = store.payload_spec_get(name).await? else { return Ok(()) };
    let validator = validators.get(name, spec.updated_at, &spec.schema)?;
    let failures = validators.run(validator, input.clone()).await.map_err(|budget| {
        ApiError::new(
            ErrorCode::InputValidationFailed,
            format!(
                "`input` could not be checked against payload spec '{name}' within {} ms \
                 (TE_VALIDATION_TIMEOUT_MS); send a smaller input or simplify the spec",
                budget.as_millis()
            ),
        )
    })?;
    if failures.is_empty() {
        return Ok(());
    }
    let mut summary: Vec<String> = failures
        .iter()
        .map(|f| format!("{}: {}", f["path"].as_str().unwrap_or(""), f["message"].as_str().unwrap_or("")))
        .collect();
    if failures.len() == MAX_FAILURES {
        summary.push(format!("(only the first {MAX_FAILURES} failures are listed)"));
    }
    Err(ApiError::new(
        ErrorCode::InputValidationFailed,
        format!("`input` does not match payload spec '{name}': {}", summary.join("; ")),
    )
    .with_details(json!(failures)))
}

/// The first [`MAX_FAILURES`] ways `input` fails `validator`, as `{path, message}`.
fn failures(validator: &jsonschema::Validator, input: &Value) -> Vec<Value> {
    if validator.is_valid(input) {
        return Vec::new();
    }
    validator
        .iter_errors(input)
        .take(MAX_FAILURES)
        .map(|e| {
            let path = e.instance_path.to_string();
            // A failing value can be as large as the input: the message quotes at most a little.
            let mut message = e.to_string();
            if message.len() > 500 {
                let cut = (0..=500).rev().find(|&i| message.is_char_boundary(i)).unwrap_or(0);
                message.truncate(cut);
                message.push('…');
            }
            json!({ "path": if path.is_empty() { "/".to_owned() } else { path }, "message": message })
        })
        .collect()
}

/// A compiled validator and the `updated_at` of the spec it was compiled from.
type CompiledSpec = (DateTime<Utc>, Arc<jsonschema::Validator>);

/// Compiled payload-spec validators, keyed by spec name and its `updated_at`, and the bounds
/// specs and validations are held to.
pub struct Validators {
    compiled: Mutex<HashMap<String, CompiledSpec>>,
    /// What a spec may cost (checked when one is created or replaced).
    pub limits: SchemaLimits,
    /// How long one input's validation may take.
    budget: Duration,
    /// Validations running at once on the blocking pool: as many as there are cores, so that
    /// inputs made to be slow hold a few blocking threads, never every one.
    running: Arc<Semaphore>,
}

impl Default for Validators {
    fn default() -> Self {
        Self::new(SchemaLimits::default(), Duration::from_millis(2_000))
    }
}

impl Validators {
    pub fn new(limits: SchemaLimits, budget: Duration) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Self { compiled: Mutex::default(), limits, budget, running: Arc::new(Semaphore::new(cores)) }
    }

    /// Validate `input` on the blocking pool; `Err(budget)` when it took longer than the
    /// budget (waiting for a place included). A validation past its budget runs on to its end
    /// (a thread cannot be stopped) and holds its place until then; the spec's bounds keep it
    /// finite.
    async fn run(&self, validator: Arc<jsonschema::Validator>, input: Value) -> Result<Vec<Value>, Duration> {
        let work = async {
            let place = self.running.clone().acquire_owned().await.expect("the semaphore is never closed");
            tokio::task::spawn_blocking(move || {
                let found = failures(&validator, &input);
                drop(place);
                found
            })
            .await
            .expect("validation does not panic")
        };
        tokio::time::timeout(self.budget, work).await.map_err(|_| self.budget)
    }

    pub fn get(&self, name: &str, updated_at: DateTime<Utc>, schema: &Value) -> ApiResult<Arc<jsonschema::Validator>> {
        if let Some((at, validator)) = self.compiled.lock().expect("validator cache lock").get(name) {
            if *at == updated_at {
                return Ok(validator.clone());
            }
        }
        let validator = Arc::new(options().build(schema).map_err(|e| {
            ApiError::new(ErrorCode::InvalidSchema, format!("payload spec '{name}' no longer compiles: {e}"))
        })?);
        self.compiled.lock().expect("validator cache lock").insert(name.to_owned(), (updated_at, validator.clone()));
        Ok(validator)
    }
}
