//! A PostgreSQL server of the test's own, for tests that stop and restart the database under
//! a running service (the shared server on 5432 serves every other test, so it cannot be
//! restarted). Made with Debian's `initdb` and `pg_ctl` in a temporary directory, on a free
//! loopback port, with fsync off; run as the `postgres` user when the tests run as root, since
//! PostgreSQL refuses to run as root.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// The newest installed server's binaries (`/usr/lib/postgresql/<version>/bin`).
fn server_binaries() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's server binaries under /usr/lib/postgresql (scripts/test installs them)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    versions.sort_by_key(|p| {
        p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok())
    });
    versions.pop().expect("a PostgreSQL version with pg_ctl")
}

impl PrivatePostgres {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let bin = server_binaries();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server = Self { dir, bin, port };
        if is_root() {
            let status = Command::new("chown").arg("-R").arg("postgres").arg(server.dir.path()).status().unwrap();
            assert!(status.success(), "chown of the data directory to postgres");
        }
        let data = server.data();
        server.run(
            "initdb",
            &["-D", data.to_str().unwrap(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
        );
        server.pg_ctl_start();
        server
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// One of the server's programs, run as `postgres` when we are root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut command = Command::new("runuser");
            command.arg("-u").arg("postgres").arg("--").arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    /// Run one of the server's programs; panics on failure.
    fn run(&self, program: &str, args: &[&str]) {
        let output = self.command(program).args(args).output().unwrap_or_else(|e| panic!("{program} runs: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    fn pg_ctl_start(&self) {
        let data = self.data();
        let log = self.dir.path().join("postgres.log");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
            self.port,
            self.dir.path().display()
        );
        self.run("pg_ctl", &["start", "-w", "-t", "60", "-D", path(&data), "-l", path(&log), "-o", &options]);
    }

    /// A fast shutdown: open connections are cut, as in a crash or a failover.
    pub fn stop(&self) {
        self.run("pg_ctl", &["stop", "-w", "-t", "60", "-m", "fast", "-D", path(&self.data())]);
    }

    /// Start again after [`PrivatePostgres::stop`], on the same port and data.
    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    /// The URL to create test databases with.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self.command("pg_ctl").args(["stop", "-m", "immediate", "-D", path(&self.data())]).output();
    }
}
