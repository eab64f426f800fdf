//! Why a plugin cannot be used or called. Each variant's message is written for the user: it
//! becomes an install's 422, an endpoint's registration error, or an attempt's error.

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("plugin '{0}' is not installed")]
    NotInstalled(String),
    /// Reading the plugin from the database failed; a later attempt may succeed.
    #[error("cannot read plugin '{name}': {source}")]
    Store {
        name: String,
        #[source]
        source: StoreError,
    },
    /// The bytes are not a plugin this host can run: what to fix.
    #[error("{0}")]
    Invalid(String),
    /// The plugin is of the other world (a renderer called as a transport, say).
    #[error("this plugin is a {actual}, not a {expected}")]
    WrongWorld { actual: &'static str, expected: &'static str },
    /// The call did not finish: a trap, the CPU or wall-clock deadline.
    #[error("{0}")]
    Call(String),
    /// The wasmtime engine could not be set up (at start-up).
    #[error("the plugin runtime could not start: {0}")]
    Runtime(String),
}

impl PluginError {
    /// Whether the same call may succeed later unchanged.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Store { .. })
    }
}

/// A refusal of the bytes, said in a sentence: what to fix.
impl From<String> for PluginError {
    fn from(message: String) -> Self {
        Self::Invalid(message)
    }
}

impl From<&str> for PluginError {
    fn from(message: &str) -> Self {
        Self::Invalid(message.to_owned())
    }
}
