//! WebAssembly plugins: sandboxed transports and renderers loaded at runtime.
//!
//! - [`runtime`]: the wasmtime engine, the linker of what the host offers, the component cache,
//!   and one call per fresh store with its CPU deadline, wall-clock timeout and memory cap.
//! - [`sandbox`]: a call's store data — WASI with nothing granted, wasi:http behind the grants,
//!   captured output and `host.log` records.
//! - [`outbound`]: wasi:http's outgoing handler: the grant checks and the pooled client every
//!   plugin request goes through.
//! - [`grants`]: which URLs a plugin may call, checked again after DNS.
//! - [`limits`]: memory and I/O limits per plugin.
//! - [`transport`]: a transport plugin behind the same [`Transport`](crate::transport::Transport)
//!   trait as the built-in ones, and a renderer plugin behind [`Renderer`](crate::template::Renderer).

pub mod grants;
pub mod limits;
pub mod outbound;
pub mod runtime;
pub mod sandbox;
pub mod transport;

pub use grants::{Grant, Grants};
pub use limits::PluginLimits;
pub use runtime::{Inspection, PluginRuntime, World};
pub use transport::{PluginHost, WasmRenderer, WasmTransport};
