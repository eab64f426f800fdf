//! An error and its causes as one line, each cause said once: some errors (sqlx's, and io
//! errors wrapped by ours) repeat their source in their own message, and a plain walk down the
//! chain would say it twice. Used for the CLI's last words and for the API's error log.

/// `error: cause: cause…`, skipping a cause whose text was already said.
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut said = String::new();
    for cause in std::iter::successors(Some(error), |e| e.source()) {
        let text = cause.to_string();
        if said.contains(&text) {
            continue;
        }
        if !said.is_empty() {
            said.push_str(": ");
        }
        said.push_str(&text);
    }
    said
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_names_each_cause_once() {
        let describe = |e: &anyhow::Error| super::describe(e.as_ref());
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = anyhow::Error::new(io).context("cannot use the key file /x: No such file or directory");
        assert_eq!(describe(&error), "cannot use the key file /x: No such file or directory");
        let error = anyhow::anyhow!("role \"x\" does not exist").context("cannot open the database");
        assert_eq!(describe(&error), "cannot open the database: role \"x\" does not exist");
    }
}
