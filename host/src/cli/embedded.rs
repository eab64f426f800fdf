//! The files `taskexec plugin new` and `plugin wit` write, built into the binary so they work
//! outside the repository: the WIT package (`transports-wit/wit`) and the guest SDK
//! (`plugins/sdk`). A unit test keeps these lists equal to the directories.

/// `transports-wit/wit`, by path inside it.
pub const WIT: &[(&str, &str)] = &[
    ("builtin.wit", include_str!("../../../transports-wit/wit/builtin.wit")),
    ("classifier.wit", include_str!("../../../transports-wit/wit/classifier.wit")),
    ("deps/cli.wit", include_str!("../../../transports-wit/wit/deps/cli.wit")),
    ("deps/clocks.wit", include_str!("../../../transports-wit/wit/deps/clocks.wit")),
    ("deps/filesystem.wit", include_str!("../../../transports-wit/wit/deps/filesystem.wit")),
    ("deps/http.wit", include_str!("../../../transports-wit/wit/deps/http.wit")),
    ("deps/io.wit", include_str!("../../../transports-wit/wit/deps/io.wit")),
    ("deps/random.wit", include_str!("../../../transports-wit/wit/deps/random.wit")),
    ("deps/sockets.wit", include_str!("../../../transports-wit/wit/deps/sockets.wit")),
    ("host.wit", include_str!("../../../transports-wit/wit/host.wit")),
    ("http-client.wit", include_str!("../../../transports-wit/wit/http-client.wit")),
    ("renderer.wit", include_str!("../../../transports-wit/wit/renderer.wit")),
    ("schedule.wit", include_str!("../../../transports-wit/wit/schedule.wit")),
    ("transport.wit", include_str!("../../../transports-wit/wit/transport.wit")),
    ("types.wit", include_str!("../../../transports-wit/wit/types.wit")),
    ("worlds.wit", include_str!("../../../transports-wit/wit/worlds.wit")),
];

/// `plugins/sdk/src`, by path inside it.
pub const SDK_SOURCES: &[(&str, &str)] = &[
    ("builtins.rs", include_str!("../../../plugins/sdk/src/builtins.rs")),
    ("classifier.rs", include_str!("../../../plugins/sdk/src/classifier.rs")),
    ("fail.rs", include_str!("../../../plugins/sdk/src/fail.rs")),
    ("http.rs", include_str!("../../../plugins/sdk/src/http.rs")),
    ("lib.rs", include_str!("../../../plugins/sdk/src/lib.rs")),
    ("log.rs", include_str!("../../../plugins/sdk/src/log.rs")),
    ("renderer.rs", include_str!("../../../plugins/sdk/src/renderer.rs")),
    ("schedule.rs", include_str!("../../../plugins/sdk/src/schedule.rs")),
    ("spec.rs", include_str!("../../../plugins/sdk/src/spec.rs")),
];

/// The SDK's manifest outside the plugins workspace (the workspace's values written out).
pub const SDK_MANIFEST: &str = r#"[package]
name = "taskexec-plugin-sdk"
version = "0.1.0"
edition = "2021"
license = "Apache-2.0"

[dependencies]
wit-bindgen = "0.57"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
serde_path_to_error = "0.1"
httpdate = "1"
"#;

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn files(root: &Path, ext: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut dirs = vec![root.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == ext) {
                    found.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn the_embedded_files_are_every_file_of_the_wit_package_and_the_sdk() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let names = |list: &[(&str, &str)]| list.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>();
        assert_eq!(names(super::WIT), files(&root.join("transports-wit/wit"), "wit"));
        assert_eq!(names(super::SDK_SOURCES), files(&root.join("plugins/sdk/src"), "rs"));
        // The standalone manifest names the same dependencies as the workspace one.
        let workspace = std::fs::read_to_string(root.join("plugins/sdk/Cargo.toml")).unwrap();
        let deps = |text: &str| -> Vec<String> {
            let section = text.split("[dependencies]").nth(1).unwrap();
            let mut names: Vec<String> = section
                .lines()
                .filter(|l| !l.trim_start().starts_with('#') && l.contains('='))
                .map(|l| l.split(['=', '.']).next().unwrap().trim().to_owned())
                .collect();
            names.sort();
            names
        };
        assert_eq!(deps(super::SDK_MANIFEST), deps(&workspace));
    }
}
