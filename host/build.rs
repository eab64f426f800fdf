//! Two things the crate needs before it compiles.
//!
//! - `sqlx::migrate!` embeds `migrations/` at compile time; without the rerun line a migration
//!   added since the last build is not seen until some source file of the crate changes.
//! - The store's statements (`src/store/sql/*.sql`, each under a `-- name: StatementName`
//!   line) become `store::sql::statements::<file>::STATEMENT_NAME` constants, with each
//!   backend's text: a `/*{phrase}*/` in a statement is replaced by that backend's phrase from
//!   the dialect table in `src/store/sql/mod.rs` (`DIALECT`). `postgres.sql` and `sqlite.sql`
//!   hold what one backend alone runs: their constants are that backend's text.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
    println!("cargo:rerun-if-changed=src/store/sql");
    let dir = Path::new("src/store/sql");
    let dialect = dialect(&std::fs::read_to_string(dir.join("mod.rs")).expect("src/store/sql/mod.rs"));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("src/store/sql")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let mut out = String::new();
    let mut all = Vec::new();
    for path in files {
        let module = path.file_stem().unwrap().to_str().unwrap().replace('-', "_");
        let text = std::fs::read_to_string(&path).unwrap();
        // `postgres.sql` and `sqlite.sql` hold statements one backend alone runs: their
        // constants are that backend's text.
        let only = ["postgres", "sqlite"].iter().position(|b| *b == module).map(|i| i + 1);
        if let Some(column) = only {
            writeln!(out, "pub mod {module} {{").unwrap();
            for (name, sql) in statements(&text, &path) {
                let text = with_dialect(&sql, &dialect, column, &name);
                writeln!(out, "    pub const {}: &str = {text:?};", screaming_snake(&name)).unwrap();
            }
            writeln!(out, "}}").unwrap();
            continue;
        }
        writeln!(out, "pub mod {module} {{\n    use super::super::Statement;").unwrap();
        for (name, sql) in statements(&text, &path) {
            let constant = screaming_snake(&name);
            all.push(format!("{module}::{constant}"));
            let postgres = with_dialect(&sql, &dialect, 1, &name);
            let sqlite = with_dialect(&sql, &dialect, 2, &name);
            writeln!(
                out,
                "    pub const {constant}: Statement = Statement {{ postgres: {postgres:?}, sqlite: {sqlite:?} }};"
            )
            .unwrap();
        }
        writeln!(out, "}}").unwrap();
    }
    // Every statement with its path, for the tests that check them all.
    writeln!(out, "#[cfg(test)]\npub const ALL: &[(&str, super::Statement)] = &[").unwrap();
    for path in &all {
        writeln!(out, "    ({path:?}, {path}),").unwrap();
    }
    writeln!(out, "];").unwrap();
    let target = Path::new(&std::env::var("OUT_DIR").unwrap()).join("statements.rs");
    std::fs::write(target, out).unwrap();
}

/// `(phrase, PostgreSQL's, SQLite's)`, from the `DIALECT` table's rows.
fn dialect(source: &str) -> Vec<[String; 3]> {
    let table = source.split("pub const DIALECT").nth(1).expect("DIALECT in src/store/sql/mod.rs");
    let table = &table[..table.find("];").expect("the end of DIALECT")];
    table
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("(\""))
        .map(|line| {
            let parts: Vec<String> = line.split('"').skip(1).step_by(2).map(str::to_owned).collect();
            assert_eq!(parts.len(), 3, "a DIALECT row is (phrase, PostgreSQL, SQLite): {line}");
            [parts[0].clone(), parts[1].clone(), parts[2].clone()]
        })
        .collect()
}

/// The file's statements, in order: `(name, text)`.
fn statements(text: &str, path: &Path) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- name:") {
            let name = name.split_whitespace().next().unwrap_or_default().to_owned();
            assert!(
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
                "{}: a statement's name is one CamelCase word: {line}",
                path.display()
            );
            assert!(!found.iter().any(|(n, _)| *n == name), "{}: {name} is named twice", path.display());
            found.push((name, String::new()));
        } else if let Some((_, sql)) = found.last_mut() {
            // Comment lines document the statement in the file; the text sent is the SQL.
            if !line.trim_start().starts_with("--") {
                sql.push_str(line);
                sql.push('\n');
            }
        }
    }
    for (name, sql) in &mut found {
        *sql = sql.trim().trim_end_matches(';').to_owned();
        assert!(!sql.is_empty(), "{}: {name} has no SQL", path.display());
    }
    found
}

/// `sql` with each `/*{phrase}*/` replaced by column `which` of its dialect row.
fn with_dialect(sql: &str, dialect: &[[String; 3]], which: usize, name: &str) -> String {
    let mut out = sql.to_owned();
    while let Some(start) = out.find("/*{") {
        let end = out[start..].find("}*/").map(|e| start + e).unwrap_or_else(|| panic!("{name}: an unclosed /*{{"));
        let phrase = &out[start + 3..end];
        let row = dialect
            .iter()
            .find(|row| row[0] == phrase)
            .unwrap_or_else(|| panic!("{name}: /*{{{phrase}}}*/ is not in DIALECT (src/store/sql/mod.rs)"));
        out.replace_range(start..end + 3, &row[which]);
    }
    out
}

fn screaming_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}
