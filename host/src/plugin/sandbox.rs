//! The store data of one plugin call: WASI with nothing granted (no files, environment,
//! arguments or sockets; stdout and stderr captured), wasi:http limited by the plugin's grants,
//! the memory cap, and the `host` interface the WIT contract offers. A store whose plugin may
//! make several deliveries (`calls_per_instance`) starts each with this per-call state afresh.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::limits::PluginLimits;
use super::outbound::{Egress, Outbound};
use super::output::OutputCapture;
use crate::contract::{host_imports, LogLevel};

/// Bytes of stdout and of stderr kept per call.
pub const OUTPUT_CAPTURE_BYTES: usize = 64 * 1024;
/// Longest log record kept, in characters.
const MAX_LOG_CHARS: usize = 1024;

/// Log records a call produced (`host.log`, then stdout/stderr lines), already capped.
#[derive(Debug, Default)]
pub struct CallLogs {
    pub records: Vec<(&'static str, String)>,
    pub suppressed: u64,
    /// Bytes of stdout and stderr written past [`OUTPUT_CAPTURE_BYTES`] each, let go.
    pub output_not_kept: u64,
    limit: usize,
}

impl CallLogs {
    fn new(limit: u32) -> Self {
        Self { records: Vec::new(), suppressed: 0, output_not_kept: 0, limit: limit as usize }
    }

    pub fn push(&mut self, level: &'static str, message: &str) {
        if self.records.len() >= self.limit {
            self.suppressed += 1;
            return;
        }
        let message: String = message.chars().take(MAX_LOG_CHARS).collect();
        self.records.push((level, message));
    }
}

pub struct PluginState {
    pub(super) table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    /// wasi:http's hooks, and what `outgoing-handler.handle` sends through.
    pub(super) outbound: Outbound,
    /// Responses `handle` received before returning, by their future's resource number, until
    /// the plugin takes them with `get` (see `outbound::future_response_get`).
    pub(super) answered: HashMap<u32, http::Response<WasiBody>>,
    pub limits: MemoryLimits,
    pub logs: CallLogs,
    stdout: OutputCapture,
    stderr: OutputCapture,
}

/// The store's limits, and the most linear memory it has grown to (what a reused instance
/// carries into its next call).
pub struct MemoryLimits {
    limits: StoreLimits,
    cap: usize,
    grown_to: usize,
}

impl ResourceLimiter for MemoryLimits {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.limits.memory_growing(current, desired, maximum)?;
        if allowed {
            self.grown_to = self.grown_to.max(desired);
        }
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

impl PluginState {
    pub fn new(egress: Arc<Egress>, limits: &PluginLimits) -> Self {
        let stdout = OutputCapture::new(OUTPUT_CAPTURE_BYTES);
        let stderr = OutputCapture::new(OUTPUT_CAPTURE_BYTES);
        let mut wasi = WasiCtx::builder();
        // Nothing is granted: no preopened directories, no environment, no arguments, no
        // sockets. Outbound HTTP goes only through wasi:http, past the grant hook.
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        Self {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            outbound: Outbound::new(egress),
            answered: HashMap::new(),
            limits: MemoryLimits {
                limits: StoreLimitsBuilder::new()
                    .memory_size(limits.memory_mb as usize * 1024 * 1024)
                    .instances(16)
                    .tables(64)
                    .memories(16)
                    .trap_on_grow_failure(true)
                    .build(),
                cap: limits.memory_mb as usize * 1024 * 1024,
                grown_to: 0,
            },
            logs: CallLogs::new(limits.max_log_records),
            stdout,
            stderr,
        }
    }

    /// Move the stdout/stderr lines this call wrote into the logs (after the call).
    pub fn collect_output(&mut self) {
        for (capture, level) in [(&self.stdout, "INFO"), (&self.stderr, "WARN")] {
            let (written, dropped) = capture.take();
            let text = String::from_utf8_lossy(&written);
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                self.logs.push(level, line);
            }
            self.logs.output_not_kept += dropped;
        }
    }

    /// The call's logs, leaving an empty record for the store's next call.
    pub fn take_logs(&mut self) -> CallLogs {
        let fresh = CallLogs::new(self.logs.limit as u32);
        std::mem::replace(&mut self.logs, fresh)
    }

    /// Whether this store, after a call that returned, can make another much as a fresh one
    /// would: at most half its memory grown (past that, a later call could run out where a
    /// fresh instance would not).
    pub fn fit_for_another_call(&self) -> bool {
        self.limits.grown_to <= self.limits.cap / 2
    }

    /// Start another call in this store: what the last call sent, was refused and answered
    /// is forgotten. Its guest memory is the plugin's own and stays.
    pub fn begin_another_call(&mut self) {
        self.outbound = Outbound::new(self.outbound.egress.clone());
        self.answered.clear();
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.outbound }
    }
}

impl host_imports::Host for PluginState {
    async fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Debug => "DEBUG",
            LogLevel::Info => "INFO",
            LogLevel::Warn => "WARN",
            LogLevel::Error => "ERROR",
        };
        self.logs.push(level, &message);
    }
}
