//! # taskexec-plugin-sdk
//!
//! Everything a Task Executor plugin needs beyond its own logic, for each of the four worlds
//! of `taskexec:plugin@0.1.0`:
//!
//! - **transports** (deliver a message their own way): the bindings of the `transport-plugin`
//!   world ([`bindings`]), and [`export!`] to register your type as the plugin;
//! - **renderers** (render endpoint specs in place of `{{ }}`): [`renderer`], with its own
//!   `export!`;
//! - **classifiers** (judge a receiver's answer after delivery): [`classifier`];
//! - **schedules** (a CRON job's ticks beyond cron): [`schedule`].
//!
//! A plugin exports one world; each world's `export!` declares that world's export in the
//! plugin's own crate, so a plugin built on this SDK claims only the export it implements.
//! [`log`] serves every world; the rest serves transports (the other worlds have no network:
//! a renderer, classifier or schedule that called [`http`] would not load):
//!
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
//!
//! A renderer, classifier or schedule is written the same way, with its module's trait and
//! `export!` (`use taskexec_plugin_sdk::classifier::{export, Answer, Classifier, Verdict};`):
//! see each module.

// The bindings name their runtime and export paths from outside the crate; inside it the same
// paths must resolve.
extern crate self as taskexec_plugin_sdk;

pub mod builtins;
pub mod classifier;
pub mod fail;
pub mod http;
pub mod log;
pub mod renderer;
pub mod schedule;
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
