//! Renderer plugins: render endpoint specs in place of the built-in `{{ }}` renderer.
//!
//! ```ignore
//! use taskexec_plugin_sdk::renderer::{export, RenderError, Renderer};
//!
//! struct Upper;
//!
//! impl Renderer for Upper {
//!     fn check(template_json: String) -> Result<(), RenderError> {
//!         serde_json::from_str::<serde_json::Value>(&template_json)
//!             .map(drop)
//!             .map_err(|e| RenderError { message: e.to_string(), variable: None })
//!     }
//!     fn render(template_json: String, _context_json: String) -> Result<String, RenderError> {
//!         Ok(template_json.to_uppercase())
//!     }
//! }
//!
//! export!(Upper);
//! ```

/// The generated bindings of the `renderer-plugin` world. Its export is declared by
/// [`export!`](crate::renderer::export) in the plugin's own crate, so a plugin built on this
/// SDK claims only the world it exports.
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "renderer-plugin",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_renderer",
        default_bindings_module: "taskexec_plugin_sdk::renderer::bindings",
        runtime_path: "taskexec_plugin_sdk::__wit_bindgen::rt",
    });
}

pub use bindings::exports::taskexec::plugin::renderer::{Guest as Renderer, RenderError};

impl RenderError {
    /// An error for people, naming no variable.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), variable: None }
    }

    /// An error caused by `variable` (`input.user.id`), which could not be resolved.
    pub fn unresolved(message: impl Into<String>, variable: impl Into<String>) -> Self {
        Self { message: message.into(), variable: Some(variable.into()) }
    }
}

/// Register `$plugin` (the name of a type implementing [`Renderer`]) as this component's
/// renderer.
#[macro_export]
#[doc(hidden)]
macro_rules! __sdk_export_renderer {
    ($plugin:ident) => {
        $crate::renderer::bindings::__export_renderer!($plugin);
    };
}

#[doc(inline)]
pub use crate::__sdk_export_renderer as export;
