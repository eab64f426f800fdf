//! Classifier plugins: judge a receiver's answer after any transport delivered it — for
//! receivers that answer `200 OK` with an error in the body, or signal rate limits their own
//! way. Called once per attempt, in a fresh instance, with no network.
//!
//! ```ignore
//! use taskexec_plugin_sdk::classifier::{export, Answer, Classifier, Retry, Verdict};
//!
//! struct ErrorInBody;
//!
//! impl Classifier for ErrorInBody {
//!     fn check(_config_json: String) -> Result<(), String> {
//!         Ok(())
//!     }
//!     fn classify(answer: Answer) -> Verdict {
//!         match String::from_utf8_lossy(&answer.body).contains("\"error\"") {
//!             true => Verdict::Retry(Retry { message: "the body reports an error".into(), after_ms: None }),
//!             false => Verdict::Keep,
//!         }
//!     }
//! }
//!
//! export!(ErrorInBody);
//! ```

/// The generated bindings of the `classifier-plugin` world (their types compare with `==`, for
/// a plugin's tests). Its export is declared by [`export!`](crate::classifier::export) in the
/// plugin's own crate.
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "classifier-plugin",
        generate_all,
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_classifier",
        default_bindings_module: "taskexec_plugin_sdk::classifier::bindings",
        runtime_path: "taskexec_plugin_sdk::__wit_bindgen::rt",
    });
}

pub use bindings::exports::taskexec::plugin::classifier::{Answer, Guest as Classifier, OpenCircuit, Retry, Verdict};
/// The transport's own failure, as an [`Answer`]'s `outcome` carries it.
pub use bindings::taskexec::plugin::types::{Failure, FailureKind};

impl Answer {
    /// The value of the first header named `name` (names arrive in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
}

/// Register `$plugin` (the name of a type implementing [`Classifier`]) as this component's
/// classifier.
#[macro_export]
#[doc(hidden)]
macro_rules! __sdk_export_classifier {
    ($plugin:ident) => {
        $crate::classifier::bindings::__export_classifier!($plugin);
    };
}

#[doc(inline)]
pub use crate::__sdk_export_classifier as export;
