//! The WIT contract (`transports-wit/`, package `taskexec:plugin@0.1.0`) as Rust types.
//!
//! `bindgen!` generates them once, in the private `generated` module; this module re-exports the
//! records every transport and renderer speaks, native or wasm, and gives them constructors.
//! The WASI interfaces a plugin world imports are mapped onto wasmtime-wasi's own bindings
//! rather than generated a second time.

mod generated {
    wasmtime::component::bindgen!({
        path: "../transports-wit/wit",
        world: "transport-plugin",
        additional_derives: [PartialEq],
        imports: { default: async },
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
        },
    });

    /// Bindings of a world that imports only `host` (and with it `types`): those are the
    /// transport world's, so every world speaks the same Rust types.
    macro_rules! host_only_world {
        ($module:ident, $world:literal) => {
            pub mod $module {
                wasmtime::component::bindgen!({
                    path: "../transports-wit/wit",
                    world: $world,
                    additional_derives: [PartialEq],
                    imports: { default: async },
                    exports: { default: async },
                    with: {
                        "taskexec:plugin/types": super::taskexec::plugin::types,
                        "taskexec:plugin/host": super::taskexec::plugin::host,
                    },
                });
            }
        };
    }

    host_only_world!(renderer_world, "renderer-plugin");
    host_only_world!(classifier_world, "classifier-plugin");
    host_only_world!(schedule_world, "schedule-plugin");
}

pub use generated::classifier_world::exports::taskexec::plugin::classifier::{
    Answer, OpenCircuit as OpenCircuitVerdict, Retry as RetryVerdict, Verdict,
};
pub use generated::classifier_world::{ClassifierPlugin, ClassifierPluginPre};
pub use generated::exports::taskexec::plugin::transport as transport_exports;
pub use generated::renderer_world::exports::taskexec::plugin::renderer::RenderError;
pub use generated::renderer_world::{RendererPlugin, RendererPluginPre};
pub use generated::schedule_world::exports::taskexec::plugin::schedule::LocalTime;
pub use generated::schedule_world::{SchedulePlugin, SchedulePluginPre};
pub use generated::taskexec::plugin::host as host_imports;
pub use generated::taskexec::plugin::http_client as http_client_imports;
pub use generated::taskexec::plugin::kafka as kafka_imports;
pub use generated::taskexec::plugin::redis_streams as redis_stream_imports;
pub use generated::taskexec::plugin::specs;
pub use generated::taskexec::plugin::types::{Failure, FailureKind, LogLevel, Message, Receipt};
pub use generated::{TransportPlugin, TransportPluginPre};

impl Failure {
    fn new(kind: FailureKind, retryable: bool, message: impl Into<String>) -> Self {
        Self { kind, retryable, message: message.into(), retry_after_ms: None }
    }

    /// The deadline passed. Retryable: the receiver may be faster next time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Timeout, true, message)
    }

    /// The receiver could not be reached. Retryable.
    pub fn connection(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Connection, true, message)
    }

    /// The receiver answered and refused.
    pub fn rejected(code: Option<u16>, retryable: bool, message: impl Into<String>) -> Self {
        Self::new(FailureKind::Rejected(code), retryable, message)
    }

    /// The rendered spec cannot be delivered. Never retryable: it would fail the same way.
    pub fn invalid_spec(message: impl Into<String>) -> Self {
        Self::new(FailureKind::InvalidSpec, false, message)
    }

    /// The transport itself failed.
    pub fn internal(retryable: bool, message: impl Into<String>) -> Self {
        Self::new(FailureKind::Internal, retryable, message)
    }

    pub fn with_retry_after_ms(mut self, delay_ms: Option<u64>) -> Self {
        self.retry_after_ms = delay_ms;
        self
    }
}

impl RenderError {
    pub fn new(message: impl Into<String>, variable: Option<String>) -> Self {
        Self { message: message.into(), variable }
    }
}
