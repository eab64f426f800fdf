//! What a plugin may use, per call. Each plugin gets the defaults unless its install asked for
//! more, up to maxima the operator sets (`TE_PLUGIN_MEMORY_MB_MAX`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginLimits {
    /// Linear memory, in MiB.
    pub memory_mb: u32,
    /// Bytes the host passes in (the rendered spec) or takes back (output, messages).
    pub max_io_bytes: u32,
    /// `host.log` records and stdout/stderr lines kept per call; the rest are counted.
    pub max_log_records: u32,
}

pub const DEFAULT_MEMORY_MB: u32 = 64;
pub const DEFAULT_MAX_IO_BYTES: u32 = 1024 * 1024;
pub const DEFAULT_MAX_LOG_RECORDS: u32 = 100;
/// The most any plugin may be given unless the operator sets `TE_PLUGIN_MEMORY_MB_MAX`.
pub const DEFAULT_MEMORY_MB_MAX: u32 = 512;

impl Default for PluginLimits {
    fn default() -> Self {
        Self {
            memory_mb: DEFAULT_MEMORY_MB,
            max_io_bytes: DEFAULT_MAX_IO_BYTES,
            max_log_records: DEFAULT_MAX_LOG_RECORDS,
        }
    }
}

impl PluginLimits {
    /// The limits for an install asking for `memory_mb`, checked against the operator's maximum.
    pub fn for_install(memory_mb: Option<u32>, memory_mb_max: u32) -> Result<Self, super::PluginError> {
        let memory_mb = memory_mb.unwrap_or(DEFAULT_MEMORY_MB.min(memory_mb_max));
        if memory_mb == 0 || memory_mb > memory_mb_max {
            return Err(super::PluginError::Invalid(format!(
                "must be between 1 and {memory_mb_max} (TE_PLUGIN_MEMORY_MB_MAX)"
            )));
        }
        Ok(Self { memory_mb, ..Self::default() })
    }
}
