//! Schedule plugins: a CRON job's ticks beyond what cron can say (business days, holiday
//! calendars, market hours), computed in the job's local wall-clock time. The host places the
//! times returned in the job's timezone; called for each next tick, in a fresh instance, with
//! no network.
//!
//! ```ignore
//! use taskexec_plugin_sdk::schedule::{export, LocalTime, Schedule};
//!
//! /// Fires once: at 09:00 on 1 January 2027, local time.
//! struct NewYear;
//!
//! impl Schedule for NewYear {
//!     fn check(_spec_json: String) -> Result<(), String> {
//!         Ok(())
//!     }
//!     fn next(_spec_json: String, after: LocalTime) -> Result<Option<LocalTime>, String> {
//!         let at = LocalTime { year: 2027, month: 1, day: 1, hour: 9, minute: 0, second: 0, weekday: 5 };
//!         let before = (after.year, after.month, after.day, after.hour) < (at.year, at.month, at.day, at.hour);
//!         Ok(before.then_some(at))
//!     }
//! }
//!
//! export!(NewYear);
//! ```

/// The generated bindings of the `schedule-plugin` world (their types compare with `==`, for a
/// plugin's tests). Its export is declared by
/// [`export!`](crate::schedule::export) in the plugin's own crate.
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "schedule-plugin",
        generate_all,
        additional_derives: [PartialEq],
        pub_export_macro: true,
        export_macro_name: "__export_schedule",
        default_bindings_module: "taskexec_plugin_sdk::schedule::bindings",
        runtime_path: "taskexec_plugin_sdk::__wit_bindgen::rt",
    });
}

pub use bindings::exports::taskexec::plugin::schedule::{Guest as Schedule, LocalTime};

/// Register `$plugin` (the name of a type implementing [`Schedule`]) as this component's
/// schedule.
#[macro_export]
#[doc(hidden)]
macro_rules! __sdk_export_schedule {
    ($plugin:ident) => {
        $crate::schedule::bindings::__export_schedule!($plugin);
    };
}

#[doc(inline)]
pub use crate::__sdk_export_schedule as export;
