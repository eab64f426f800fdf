//! An endpoint spec as a serde type. `validate` gets the spec as registered (templates such as
//! `{{secret.token}}` not yet rendered); `deliver` gets it rendered, in `message.spec_json`.

use serde::de::DeserializeOwned;

use crate::{fail, Failure, Message};

/// Parse a spec, naming the field at fault: "`priority`: invalid type: string \"high\",
/// expected u8".
pub fn parse<T: DeserializeOwned>(spec_json: &str) -> Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_str(spec_json);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if path == "." {
            inner.to_string()
        } else {
            format!("`{path}`: {inner}")
        }
    })
}

/// The rendered spec of a delivery; a spec that no longer parses is a permanent failure.
pub fn for_delivery<T: DeserializeOwned>(message: &Message) -> Result<T, Failure> {
    parse(&message.spec_json).map_err(fail::invalid_spec)
}

/// Whether a spec string still holds template syntax (as in `validate`, before rendering):
/// check its form only once it is rendered.
pub fn is_template(value: &str) -> bool {
    value.contains("{{")
}
