//! The store data of one plugin call: WASI with nothing granted (no files, environment,
//! arguments or sockets; stdout and stderr captured), wasi:http limited by the plugin's grants,
//! the memory cap, and the `host` interface the WIT contract offers.

use std::sync::{Arc, Mutex};

use axum::http;
use http_body_util::BodyExt;
use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::grants::Grants;
use super::limits::PluginLimits;
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

/// The requests a call tried to send where its grants did not allow, for its logs.
pub type Denials = Arc<Mutex<Vec<String>>>;

/// wasi:http's policy hook: only granted destinations, checked again after DNS, sent through
/// one shared client so plugin requests reuse keep-alive connections like the native HTTP
/// transport does (wasmtime-wasi-http's default opens a new connection for every request).
pub struct GrantHooks {
    grants: Arc<Grants>,
    denials: Denials,
    client: reqwest::Client,
}

/// The client every plugin request goes through. Redirects are not followed: a redirect to a
/// host outside the grants must not be reachable that way (the plugin sees the 3xx).
pub fn plugin_http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()
        .expect("the plugin HTTP client builds")
}

/// Largest response body a plugin is handed, so one answer cannot exhaust the host.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

fn transport_error(error: &reqwest::Error) -> wasmtime_wasi_http::Error {
    if error.is_timeout() {
        wasmtime_wasi_http::Error::ConnectionReadTimeout
    } else if error.is_connect() {
        wasmtime_wasi_http::Error::ConnectionRefused
    } else {
        wasmtime_wasi_http::Error::ConnectionTerminated
    }
}

impl WasiHttpHooks for GrantHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn std::future::Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn std::future::Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn std::future::Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        drop(fut);
        let grants = self.grants.clone();
        let denials = self.denials.clone();
        let client = self.client.clone();
        Box::new(async move {
            let uri = request.uri().clone();
            let scheme = uri.scheme_str().unwrap_or("https").to_owned();
            let host = uri.host().unwrap_or_default().to_owned();
            let port = uri.port_u16().unwrap_or(if scheme == "http" { 80 } else { 443 });
            let deny = |why: String| {
                denials.lock().expect("denials lock").push(why);
                wasmtime_wasi_http::Error::HttpRequestDenied
            };
            if !grants.allows(&scheme, &host, port) {
                return Err(deny(format!("{scheme}://{host}:{port} is not granted to this plugin")));
            }
            let addresses: Vec<_> = tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| wasmtime_wasi_http::Error::DestinationNotFound)?
                .collect();
            if let Some(address) = addresses.iter().find(|a| !grants.allows_address(a.ip(), &scheme, port)) {
                denials.lock().expect("denials lock").push(format!(
                    "{scheme}://{host}:{port} resolves to {}, an internal address not granted by address",
                    address.ip()
                ));
                return Err(wasmtime_wasi_http::Error::DestinationIpProhibited);
            }
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let mut outgoing = client.request(parts.method, parts.uri.to_string()).headers(parts.headers).body(body);
            let total = options.as_ref().and_then(|o| o.first_byte_timeout.or(o.connect_timeout));
            if let Some(timeout) = total {
                outgoing = outgoing.timeout(timeout);
            }
            let mut response = outgoing.send().await.map_err(|e| transport_error(&e))?;
            let mut answer = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let mut collected = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| transport_error(&e))? {
                if collected.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(wasmtime_wasi_http::Error::HttpResponseBodySize(Some(MAX_RESPONSE_BYTES as u64)));
                }
                collected.extend_from_slice(&chunk);
            }
            let body: WasiBody = http_body_util::Full::new(axum::body::Bytes::from(collected))
                .map_err(|never| match never {})
                .boxed_unsync();
            let answer = answer.body(body).map_err(|_| wasmtime_wasi_http::Error::HttpResponseIncomplete)?;
            Ok((
                answer,
                Box::new(async { Ok(()) })
                    as Box<dyn std::future::Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
            ))
        })
    }
}

pub struct PluginState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: GrantHooks,
    pub limits: StoreLimits,
    pub logs: CallLogs,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    pub denials: Denials,
}

impl PluginState {
    pub fn new(grants: Arc<Grants>, limits: &PluginLimits, client: reqwest::Client) -> Self {
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
        let denials = Denials::default();
        Self {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: GrantHooks { grants, denials: denials.clone(), client },
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
            denials,
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
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
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
