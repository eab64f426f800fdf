//! A tenant's quotas: its limits as set, one limit by name, and what going past one says.
//! How the API holds and checks them is `crate::quota`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A tenant's limits. Unset (`null`): the server-wide default applies, and without one, no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Quotas {
    /// Jobs created a second, by every route that creates them (a batch counts each of its
    /// jobs), with a burst of as many; over it: `429 RATE_LIMITED` with `Retry-After`.
    pub creates_per_second: Option<u32>,
    /// CRON jobs active at once (retired versions do not count).
    pub active_cron_jobs: Option<u32>,
    /// The shortest time between two ticks of a CRON job, in seconds.
    pub min_cron_interval_sec: Option<u32>,
    /// Executions not yet finished (PENDING, QUEUED, RUNNING, RETRYING) at once.
    pub unfinished_executions: Option<u64>,
    /// Endpoints.
    pub endpoints: Option<u32>,
    /// Bytes of one job's `input`, as JSON.
    pub max_input_bytes: Option<u32>,
}

/// One limit, as error messages and `GET /tenants/{tenant}/usage` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quota {
    CreatesPerSecond,
    ActiveCronJobs,
    MinCronIntervalSec,
    UnfinishedExecutions,
    Endpoints,
    MaxInputBytes,
}

impl Quota {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreatesPerSecond => "creates_per_second",
            Self::ActiveCronJobs => "active_cron_jobs",
            Self::MinCronIntervalSec => "min_cron_interval_sec",
            Self::UnfinishedExecutions => "unfinished_executions",
            Self::Endpoints => "endpoints",
            Self::MaxInputBytes => "max_input_bytes",
        }
    }
}

/// What a request would take past one of its tenant's quotas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverQuota {
    pub quota: Quota,
    pub tenant: String,
    pub limit: u64,
    /// What the tenant holds or asks for, against `limit`.
    pub wanted: u64,
    /// When waiting helps (the create rate): how long.
    pub retry_after: Option<Duration>,
}

impl std::fmt::Display for OverQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (quota, tenant, limit, wanted) = (self.quota.as_str(), &self.tenant, self.limit, self.wanted);
        match self.quota {
            Quota::CreatesPerSecond => {
                write!(f, "Tenant '{tenant}' is over its quota `{quota}` ({limit} jobs a second)")
            }
            Quota::MinCronIntervalSec => {
                write!(f, "The quota `{quota}` of tenant '{tenant}' is {limit} s: this schedule ticks {wanted} s apart")
            }
            Quota::MaxInputBytes => {
                write!(f, "The quota `{quota}` of tenant '{tenant}' is {limit} bytes: this input is {wanted}")
            }
            _ => write!(f, "Tenant '{tenant}' is at its quota `{quota}` ({limit}): this would make it {wanted}"),
        }
    }
}

impl Quotas {
    /// Each limit this sets, else `defaults`'.
    pub fn or(&self, defaults: &Quotas) -> Quotas {
        Quotas {
            creates_per_second: self.creates_per_second.or(defaults.creates_per_second),
            active_cron_jobs: self.active_cron_jobs.or(defaults.active_cron_jobs),
            min_cron_interval_sec: self.min_cron_interval_sec.or(defaults.min_cron_interval_sec),
            unfinished_executions: self.unfinished_executions.or(defaults.unfinished_executions),
            endpoints: self.endpoints.or(defaults.endpoints),
            max_input_bytes: self.max_input_bytes.or(defaults.max_input_bytes),
        }
    }

    /// `patch` applied as a JSON merge patch (RFC 7386): a field given sets it, `null` unsets
    /// it (back to the default), a field not given stays. An error names the field.
    pub fn patched(&self, patch: &serde_json::Value) -> Result<Quotas, (String, String)> {
        let Some(patch) = patch.as_object() else {
            return Err(("quotas".into(), "must be an object".into()));
        };
        let mut merged = serde_json::to_value(self).expect("quotas serialize");
        for (field, value) in patch {
            // Each field read alone first, so that a refusal names it.
            let alone = serde_json::Value::Object([(field.clone(), value.clone())].into_iter().collect());
            serde_json::from_value::<Quotas>(alone).map_err(|e| (format!("quotas.{field}"), e.to_string()))?;
            merged[field] = value.clone();
        }
        let quotas: Quotas = serde_json::from_value(merged).map_err(|e| ("quotas".to_owned(), e.to_string()))?;
        if quotas.creates_per_second == Some(0) {
            return Err(("quotas.creates_per_second".into(), "must be at least 1".into()));
        }
        Ok(quotas)
    }
}

/// `wanted` against `limit`, if there is one: an [`OverQuota`] past it.
pub fn within(quota: Quota, tenant: &str, limit: Option<u64>, wanted: u64) -> Result<(), OverQuota> {
    match limit {
        Some(limit) if wanted > limit => {
            Err(OverQuota { quota, tenant: tenant.to_owned(), limit, wanted, retry_after: None })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_sets_unsets_and_keeps() {
        let now = Quotas { endpoints: Some(2), active_cron_jobs: Some(5), ..Quotas::default() };
        let patched = now.patched(&json!({"endpoints": 3, "active_cron_jobs": null})).unwrap();
        assert_eq!((patched.endpoints, patched.active_cron_jobs), (Some(3), None));
        let kept = now.patched(&json!({"max_input_bytes": 10})).unwrap();
        assert_eq!((kept.endpoints, kept.max_input_bytes), (Some(2), Some(10)));
        for bad in [json!({"endpoints": -1}), json!({"endpoints": "many"}), json!({"endpoint": 1})] {
            let (field, _) = now.patched(&bad).unwrap_err();
            assert!(field.starts_with("quotas"), "{bad}: {field}");
        }
        assert_eq!(now.patched(&json!({"endpoints": -1})).unwrap_err().0, "quotas.endpoints");
        assert!(now.patched(&json!({"creates_per_second": 0})).is_err());
        assert!(now.patched(&json!([1])).is_err());
    }

    #[test]
    fn counts_past_a_limit_are_refused_naming_it() {
        assert!(within(Quota::Endpoints, "acme", Some(2), 2).is_ok());
        assert!(within(Quota::Endpoints, "acme", None, 1_000).is_ok());
        let over = within(Quota::Endpoints, "acme", Some(2), 3).unwrap_err();
        assert_eq!(over.to_string(), "Tenant 'acme' is at its quota `endpoints` (2): this would make it 3");
    }
}
