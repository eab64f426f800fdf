//! The store data of one plugin call: WASI with nothing granted (no files, environment,
//! arguments or sockets; stdout and stderr captured), wasi:http limited by the plugin's grants,
//! the memory cap, and the `host` interface the WIT contract offers.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http;

use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::limits::PluginLimits;
use super::outbound::{Egress, Outbound};
use crate::contract::{host_imports, LogLevel};

/// Bytes of stdout and of stderr kept per call.
const OUTPUT_CAPTURE_BYTES: usize = 64 * 1024;
/// Longest log record kept, in characters.
const MAX_LOG_CHARS: usize = 1024;

/// Log records a call produced (`host.log`, then stdout/stderr lines), already capped.
#[derive(Debug, Default)]
pub struct CallLogs {
    pub records: Vec<(&'static str, String)>,
    pub suppressed: u64,
    limit: usize,
}

impl CallLogs {
    fn new(limit: u32) -> Self {
        Self { records: Vec::new(), suppressed: 0, limit: limit as usize }
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
    pub limits: StoreLimits,
    pub logs: CallLogs,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl PluginState {
    pub fn new(egress: Arc<Egress>, limits: &PluginLimits) -> Self {
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPTURE_BYTES);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPTURE_BYTES);
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
            limits: StoreLimitsBuilder::new()
                .memory_size(limits.memory_mb as usize * 1024 * 1024)
                .instances(16)
                .tables(64)
                .memories(16)
                .trap_on_grow_failure(true)
                .build(),
            logs: CallLogs::new(limits.max_log_records),
            stdout,
            stderr,
        }
    }

    /// Move captured stdout/stderr lines into the logs (after the call).
    pub fn collect_output(&mut self) {
        for (pipe, level) in [(self.stdout.contents(), "INFO"), (self.stderr.contents(), "WARN")] {
            let text = String::from_utf8_lossy(&pipe).into_owned();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                self.logs.push(level, line);
            }
        }
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
