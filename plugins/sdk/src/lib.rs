//! # taskexec-plugin-sdk
//!
//! Everything a Task Executor **transport plugin** needs beyond its own logic:
//!
//! - the bindings of the `transport-plugin` world of `taskexec:plugin@0.1.0` ([`bindings`]),
//!   and [`export!`] to register your type as the plugin;
//! - [`http`]: requests in a few lines (one host call each), answers mapped to [`Failure`]s
//!   the host retries (or not) correctly;
//! - [`builtins`]: produce to Kafka and append to Redis Streams through the host's own clients,
//!   with the built-in endpoint specs as types;
//! - [`spec`]: your endpoint spec as a serde type, with errors that name the field;
//! - [`log`]: records kept in the execution's logs;
//! - [`fail`]: the failures the host understands, by kind.
//!
//! ```ignore
//! use taskexec_plugin_sdk::{export, http, spec, Failure, Message, Receipt, Transport};
//!
//! #[derive(serde::Deserialize)]
//! struct Spec { url: String }
//!
//! struct Hello;
//!
//! impl Transport for Hello {
//!     fn validate(spec_json: String) -> Result<(), String> {
//!         spec::parse::<Spec>(&spec_json).map(|_| ())
//!     }
//!     fn deliver(message: Message) -> Result<Receipt, Failure> {
//!         let spec: Spec = spec::for_delivery(&message)?;
//!         let answer = http::post(&spec.url).json(&serde_json::json!({"hello": "world"})).send()?;
//!         answer.receipt()
//!     }
//! }
//!
//! export!(Hello);
//! ```

// The bindings name their runtime and export paths from outside the crate; inside it the same
// paths must resolve.
extern crate self as taskexec_plugin_sdk;

pub mod builtins;
pub mod fail;
pub mod http;
pub mod log;
pub mod spec;

/// The generated bindings of the `transport-plugin` world (WIT in `wit/`, a copy of the
/// repository's `transports-wit/wit`). Reach for them only for what [`http`] does not cover.
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "transport-plugin",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_transport",
        default_bindings_module: "taskexec_plugin_sdk::bindings",
        runtime_path: "taskexec_plugin_sdk::__wit_bindgen::rt",
    });
}

#[doc(hidden)]
pub use wit_bindgen as __wit_bindgen;

pub use bindings::exports::taskexec::plugin::transport::Guest as Transport;
pub use bindings::taskexec::plugin::types::{Failure, FailureKind, LogLevel, Message, Receipt};

/// Register `$plugin` (the name of a type implementing [`Transport`]) as this component's
/// transport.
#[macro_export]
macro_rules! export {
    ($plugin:ident) => {
        $crate::bindings::__export_transport!($plugin);
    };
}

impl Receipt {
    /// A receipt whose output (what the execution records) is `output`.
    pub fn json(output: &serde_json::Value) -> Self {
        Self { output_json: output.to_string() }
    }
}
