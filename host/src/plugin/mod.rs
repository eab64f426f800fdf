//! WebAssembly plugins: sandboxed transports and renderers loaded at runtime.
//!
//! - [`runtime`]: the calls into plugins (deliver, validate, render), each in a fresh store with
//!   its CPU deadline, wall-clock timeout and memory cap, built from:
//!   - `engine`: the wasmtime engine, the linker of what the host offers, compiling and
//!     type-checking components, stores and their CPU deadline;
//!   - `artifacts`: linked components by sha256 in memory, compiled artifacts on disk;
//!   - `instances`: the pooling allocator's slots, spare instances, retired stores, and the
//!     parked instances of plugins installed to reuse them (`calls_per_instance`).
//! - [`sandbox`]: a call's store data — WASI with nothing granted, wasi:http behind the grants,
//!   captured output (`output`: bounded per call, the excess counted) and `host.log` records.
//! - [`outbound`]: the policy every plugin request passes (grants, the operator's egress
//!   policy, checked on the address connected to) and the pooled client it goes through.
//! - [`wasi_http`]: the host's own `outgoing-handler.handle` and `future-incoming-response.get`,
//!   linked in place of wasmtime-wasi-http's.
//! - [`http_client`]: the `http-client` import, a request in one host call down the same path.
//! - [`builtins`]: the `kafka` and `redis-streams` imports: a plugin's grants checked, then the
//!   built-in Kafka and Redis transports (the process's own pooled clients) do the work.
//! - [`grants`]: where a plugin may send (URLs, Kafka brokers, Redis servers), checked again
//!   after DNS.
//! - [`limits`]: memory, I/O and instance-reuse limits per plugin.
//! - [`host`]: the plugin host: the runtime, the plugin store, and each plugin's newest version.
//!
//! A transport plugin is called through the same [`Transport`](crate::transport::Transport)
//! trait as the built-in transports (`transport::wasm`), and a renderer plugin through
//! [`Renderer`](crate::template::Renderer) (`template::wasm`). The one way back is
//! [`builtins`], which produces and appends through the built-in Kafka and Redis transports.

mod artifacts;
pub mod builtins;
mod engine;
pub mod error;
pub mod grants;
pub mod host;
pub mod http_client;
mod instances;
pub mod limits;
pub mod outbound;
mod output;
pub mod runtime;
pub mod sandbox;
pub mod wasi_http;

pub use crate::domain::PluginRef;
pub use engine::{Inspection, Loaded, World};
pub use error::PluginError;
pub use grants::{Grant, Grants};
pub use host::PluginHost;
pub use instances::ReuseScope;
pub use limits::PluginLimits;
pub use runtime::PluginRuntime;
