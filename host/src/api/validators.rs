//! Payload-spec validation of job input: compiled JSON Schema validators, cached per spec name
//! and `updated_at`, and the check that answers 422 listing every failing path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::api::error::{ApiError, ApiResult, ErrorCode};
use crate::store::Store;

/// Check `input` against the endpoint's payload spec; 422 listing every failing path.
pub async fn validate_input(
    store: &dyn Store,
    validators: &Validators,
    payload_spec: Option<&str>,
    input: &Value,
) -> ApiResult<()> {
    let Some(name) = payload_spec else { return Ok(()) };
    let Some(spec) = store.payload_spec_get(name).await? else { return Ok(()) };
    let validator = validators.get(name, spec.updated_at, &spec.schema)?;
    let failures: Vec<Value> = validator
        .iter_errors(input)
        .map(|e| {
            let path = e.instance_path.to_string();
            json!({ "path": if path.is_empty() { "/".to_owned() } else { path }, "message": e.to_string() })
        })
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    let summary: Vec<String> = failures
        .iter()
        .map(|f| format!("{}: {}", f["path"].as_str().unwrap_or(""), f["message"].as_str().unwrap_or("")))
        .collect();
    Err(ApiError::new(
        ErrorCode::InputValidationFailed,
        format!("`input` does not match payload spec '{name}': {}", summary.join("; ")),
    )
    .with_details(json!(failures)))
}

/// A compiled validator and the `updated_at` of the spec it was compiled from.
type CompiledSpec = (DateTime<Utc>, Arc<jsonschema::Validator>);

/// Compiled payload-spec validators, keyed by spec name and its `updated_at`.
#[derive(Default)]
pub struct Validators {
    compiled: Mutex<HashMap<String, CompiledSpec>>,
}

impl Validators {
    pub fn get(&self, name: &str, updated_at: DateTime<Utc>, schema: &Value) -> ApiResult<Arc<jsonschema::Validator>> {
        if let Some((at, validator)) = self.compiled.lock().expect("validator cache lock").get(name) {
            if *at == updated_at {
                return Ok(validator.clone());
            }
        }
        let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| {
            ApiError::new(ErrorCode::InvalidSchema, format!("payload spec '{name}' no longer compiles: {e}"))
        })?);
        self.compiled.lock().expect("validator cache lock").insert(name.to_owned(), (updated_at, validator.clone()));
        Ok(validator)
    }
}
