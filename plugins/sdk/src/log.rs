//! Log records, kept in the execution's logs tagged with the plugin's name (at most 100 a call,
//! each cut to 1,024 characters). Never log a secret.

use crate::bindings::taskexec::plugin::host;
use crate::LogLevel;

pub fn debug(message: &str) {
    host::log(LogLevel::Debug, message);
}

pub fn info(message: &str) {
    host::log(LogLevel::Info, message);
}

pub fn warn(message: &str) {
    host::log(LogLevel::Warn, message);
}

pub fn error(message: &str) {
    host::log(LogLevel::Error, message);
}
