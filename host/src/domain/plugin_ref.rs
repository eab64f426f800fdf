//! Which plugin an endpoint uses: `name` (its newest version, at each call) or `name@3` (that
//! version, whatever is installed after it).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PluginRef {
    pub name: String,
    /// None: the newest version.
    pub version: Option<i32>,
}

impl PluginRef {
    /// `name` or `name@VERSION` (a whole number from 1); the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once('@') {
            None => Ok(Self { name: text.to_owned(), version: None }),
            Some((name, version)) => match version.parse::<i32>() {
                Ok(v) if v >= 1 => Ok(Self { name: name.to_owned(), version: Some(v) }),
                _ => Err(format!("`{text}`: the version after @ must be a whole number from 1, like {name}@2")),
            },
        }
    }
}

/// The newest version of the plugin `name`.
impl From<&str> for PluginRef {
    fn from(name: &str) -> Self {
        Self { name: name.to_owned(), version: None }
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            None => f.write_str(&self.name),
            Some(v) => write!(f, "{}@{v}", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PluginRef;

    #[test]
    fn a_reference_is_a_name_and_maybe_a_version() {
        assert_eq!(PluginRef::parse("hook").unwrap(), PluginRef { name: "hook".into(), version: None });
        let pinned = PluginRef::parse("hook@3").unwrap();
        assert_eq!((pinned.version, pinned.to_string()), (Some(3), "hook@3".to_owned()));
        for bad in ["hook@", "hook@0", "hook@x", "hook@-1"] {
            assert!(PluginRef::parse(bad).unwrap_err().contains("whole number"), "{bad}");
        }
    }
}
