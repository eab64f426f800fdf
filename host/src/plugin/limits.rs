//! What a plugin may use, per call. Each plugin gets the defaults unless its install asked for
//! more, up to maxima the operator sets (`TE_PLUGIN_MEMORY_MB_MAX`), and how many deliveries one
//! instance of it may make (`calls_per_instance`, 1 unless the install opts in to reuse).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginLimits {
    /// Linear memory, in MiB.
    pub memory_mb: u32,
    /// Bytes the host passes in (the rendered spec) or takes back (output, messages).
    pub max_io_bytes: u32,
    /// `host.log` records and stdout/stderr lines kept per call; the rest are counted.
    pub max_log_records: u32,
    /// Deliveries one instance of a transport plugin may make, one after another and all for
    /// the same endpoint version, before it is replaced by a fresh one. 1 (the default): every
    /// delivery gets a fresh instance, so nothing a plugin keeps in memory outlives the call.
    /// More trades that isolation for speed — instantiating is most of a plugin's overhead —
    /// and is for plugins written to keep no state that matters between calls.
    #[serde(default = "one_call")]
    pub calls_per_instance: u32,
}

fn one_call() -> u32 {
    1
}

pub const DEFAULT_MEMORY_MB: u32 = 64;
pub const DEFAULT_MAX_IO_BYTES: u32 = 1024 * 1024;
pub const DEFAULT_MAX_LOG_RECORDS: u32 = 100;
/// The most any plugin may be given unless the operator sets `TE_PLUGIN_MEMORY_MB_MAX`.
pub const DEFAULT_MEMORY_MB_MAX: u32 = 512;
/// The most deliveries an install may let one instance make (wasmtime's `serve` reuses an
/// instance for 128 requests by default; a bound keeps a slow leak in a plugin from growing
/// without end).
pub const MAX_CALLS_PER_INSTANCE: u32 = 1000;

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory_mb: DEFAULT_MEMORY_MB,
            max_io_bytes: DEFAULT_MAX_IO_BYTES,
            max_log_records: DEFAULT_MAX_LOG_RECORDS,
            calls_per_instance: 1,
        }
    }
}

/// What an install asks for beyond the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct InstallLimits {
    pub memory_mb: Option<u32>,
    pub calls_per_instance: Option<u32>,
}

/// An install asked for more than it may have: the field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    pub field: &'static str,
    pub message: String,
}

impl PluginLimits {
    /// The limits for an install asking for `asked`, checked against the operator's maximum.
    pub fn for_install(asked: InstallLimits, memory_mb_max: u32) -> Result<Self, LimitError> {
        let memory_mb = asked.memory_mb.unwrap_or(DEFAULT_MEMORY_MB.min(memory_mb_max));
        if memory_mb == 0 || memory_mb > memory_mb_max {
            return Err(LimitError {
                field: "memory_mb",
                message: format!("must be between 1 and {memory_mb_max} (TE_PLUGIN_MEMORY_MB_MAX)"),
            });
        }
        let calls_per_instance = asked.calls_per_instance.unwrap_or(1);
        if !(1..=MAX_CALLS_PER_INSTANCE).contains(&calls_per_instance) {
            return Err(LimitError {
                field: "calls_per_instance",
                message: format!(
                    "must be between 1 (a fresh instance for every delivery) and {MAX_CALLS_PER_INSTANCE}"
                ),
            });
        }
        Ok(Self { memory_mb, calls_per_instance, ..Self::default() })
    }

    /// Whether an instance may make more than one delivery.
    pub fn reuses_instances(&self) -> bool {
        self.calls_per_instance > 1
    }
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {}", self.field, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_reuses_instances_only_when_it_asks_to_within_bounds() {
        let asked = |calls_per_instance| InstallLimits { memory_mb: None, calls_per_instance };
        let default = PluginLimits::for_install(asked(None), 512).unwrap();
        assert_eq!((default.calls_per_instance, default.reuses_instances()), (1, false));
        assert!(PluginLimits::for_install(asked(Some(128)), 512).unwrap().reuses_instances());
        for bad in [0, MAX_CALLS_PER_INSTANCE + 1] {
            let error = PluginLimits::for_install(asked(Some(bad)), 512).unwrap_err();
            assert_eq!(error.field, "calls_per_instance", "{error}");
        }
        let error = PluginLimits::for_install(InstallLimits { memory_mb: Some(1024), ..asked(None) }, 512).unwrap_err();
        assert!(error.field == "memory_mb" && error.message.contains("512"), "{error}");
    }

    #[test]
    fn limits_stored_before_reuse_existed_mean_a_fresh_instance_per_call() {
        let stored = serde_json::json!({"memory_mb": 64, "max_io_bytes": 1048576, "max_log_records": 100});
        let limits: PluginLimits = serde_json::from_value(stored).unwrap();
        assert_eq!(limits, PluginLimits::default());
        assert!(!limits.reuses_instances());
    }
}
