//! WebAssembly plugins: built from `plugins/` for wasm32-wasip2, installed with the real CLI,
//! and run by the real binary. The registry runs on both backends; the sandbox tests run on
//! SQLite, since the plugin runtime does not involve the store beyond reading the plugin.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::both_backends;
use crate::support::fixtures::{http_endpoint, immediate, kafka_consumer, next_record, wait_for_status};
use crate::support::server::{command, API_KEY};
use crate::support::{eventually, Backend, Client, Receiver, Server, ServerOptions, TestDb};

mod classifier;
mod registry;
mod renderer;
mod schedule;
mod transport;

/// Build every plugin once per test run; the path of `name`'s component.
pub(crate) fn component(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = root.join("plugins/target");
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(root.join("plugins/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "building the plugins failed (is the wasm32-wasip2 target installed? scripts/test adds it)"
        );
        target.join("wasm32-wasip2/release")
    });
    dir.join(format!("{}.wasm", name.replace('-', "_")))
}

/// Run `taskexec plugin ARGS` against `server`; (success, stdout + stderr).
fn cli(server: &Server, db: &TestDb, args: &[&str]) -> (bool, String) {
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    let out = command(&all, &env, db.dir.path()).stdin(Stdio::null()).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Install `file`'s component from plugins/ as `name` with the real CLI, allowed to reach
/// `allow_host`; the CLI's output.
fn install_allowing(server: &Server, db: &TestDb, file: &str, name: &str, allow_host: &str) -> String {
    let (ok, out) =
        cli(server, db, &["install", component(file).to_str().unwrap(), "--name", name, "--allow-host", allow_host]);
    assert!(ok, "{out}");
    out
}

async fn upload(api: &Client, query: &str, bytes: Vec<u8>) -> crate::support::server::Response {
    api.send_raw(reqwest::Method::POST, &format!("/plugins?{query}"), Some("application/wasm"), bytes).await
}

/// Run `taskexec plugin ARGS` with no server; (exit success, stdout, stderr).
fn offline(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    let out = command(&all, &[], dir).stdin(Stdio::null()).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The execution `job` created, once it is `status`; with its attempts.
async fn finished(api: &Client, job: &Value, status: &str) -> (Value, Vec<Value>) {
    let execution_id = job["execution"]["execution_id"].as_str().unwrap();
    let execution = wait_for_status(api, execution_id, status).await;
    let attempts = api.get(&format!("/executions/{execution_id}/attempts")).await.body;
    (execution, attempts["items"].as_array().unwrap().clone())
}

fn at_of(attempt: &Value, field: &str) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(attempt[field].as_str().unwrap()).unwrap()
}
