//! `TE_DATABASE_URL`, read into where the data lives.

use super::ConfigError;
use crate::store::DatabaseLocation;

impl DatabaseLocation {
    /// PostgreSQL for a `postgres://` (or `postgresql://`) URL, embedded SQLite for a `sqlite:`
    /// URL or a plain file path, `taskexec.db` when none is given.
    pub fn parse(url: Option<&str>) -> Result<Self, ConfigError> {
        match url.map(str::trim).filter(|u| !u.is_empty()) {
            None => Ok(Self::Sqlite("taskexec.db".into())),
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Ok(Self::Postgres(u.to_owned()))
            }
            Some(u) => match u.strip_prefix("sqlite://").or_else(|| u.strip_prefix("sqlite:")) {
                Some(path) if !path.is_empty() => {
                    // Said here, before anything is made next to it (the key file, say), so the
                    // error names the real cause.
                    let path = std::path::PathBuf::from(path);
                    match path.parent().filter(|dir| !dir.as_os_str().is_empty() && !dir.is_dir()) {
                        Some(dir) => Err(ConfigError::new(
                            "TE_DATABASE_URL",
                            format!(
                                "the directory {} for the SQLite database does not exist; create it first",
                                dir.display()
                            ),
                        )),
                        None => Ok(Self::Sqlite(path)),
                    }
                }
                _ => Err(ConfigError::new(
                    "TE_DATABASE_URL",
                    format!(
                        "expected postgres://…, postgresql://… or sqlite:PATH, got '{}'",
                        u.split(':').next().unwrap_or_default()
                    ),
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Backend, DatabaseLocation};

    #[test]
    fn database_location_defaults_to_embedded_sqlite() {
        assert_eq!(DatabaseLocation::parse(None).unwrap(), DatabaseLocation::Sqlite("taskexec.db".into()));
        assert_eq!(DatabaseLocation::parse(Some(" ")).unwrap(), DatabaseLocation::Sqlite("taskexec.db".into()));
        assert_eq!(
            DatabaseLocation::parse(Some("sqlite:/tmp/x.db")).unwrap(),
            DatabaseLocation::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(DatabaseLocation::parse(Some("postgresql://h/db")).unwrap().backend(), Backend::Postgres);
    }

    #[test]
    fn database_location_error_does_not_echo_credentials() {
        let err = DatabaseLocation::parse(Some("mysql://user:hunter2@h/db")).unwrap_err().to_string();
        assert!(err.starts_with("TE_DATABASE_URL: ") && err.contains("mysql"), "{err}");
        assert!(!err.contains("hunter2"));
    }
}
