//! The real `taskexec` binary as a child process, and a client for its API.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::{wait_for, Backend, TestDb};

pub const API_KEY: &str = "test-api-key-0123456789";
/// 32 bytes of 0x01, base64: the key PostgreSQL-backed test servers get.
pub const SECRET_KEY: &str = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

/// The `taskexec` binary to start: this build's, or `TE_TEST_BINARY` (a benchmark's A/B run
/// against another commit's build).
pub fn binary() -> String {
    std::env::var("TE_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_taskexec").to_owned())
}

#[derive(Clone)]
pub struct ServerOptions {
    pub env: HashMap<String, String>,
    /// Leave out TE_API_KEYS (embedded key generation) or TE_SECRET_ENCRYPTION_KEY.
    pub without: Vec<&'static str>,
    /// The log message that says the process is ready ("Listening." when it serves the API).
    pub ready: &'static str,
}

impl ServerOptions {
    pub fn new() -> Self {
        Self { env: HashMap::new(), without: Vec::new(), ready: "Listening." }
    }

    /// Run only `roles` (comma-separated); ready when `ready` is logged.
    pub fn roles(self, roles: &str, ready: &'static str) -> Self {
        Self { ready, ..self.env("TE_ROLES", roles) }
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_owned(), value.to_owned());
        self
    }

    pub fn without(mut self, key: &'static str) -> Self {
        self.without.push(key);
        self
    }
}

pub struct Server {
    child: Child,
    pub base_url: String,
    /// Every line the process wrote to stdout and stderr, as it wrote them.
    pub output: Arc<Mutex<Vec<String>>>,
}

/// The environment a test server starts with: the test database, JSON logs, an ephemeral port.
pub fn base_env(db: &TestDb, options: &ServerOptions) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("TE_DATABASE_URL".into(), db.url.clone()),
        ("TE_LISTEN_ADDR".into(), "127.0.0.1:0".into()),
        ("TE_LOG_FORMAT".into(), "json".into()),
        ("TE_LOG".into(), "debug".into()),
        ("TE_API_KEYS".into(), API_KEY.into()),
        ("TE_DB_POOL_SIZE".into(), "5".into()),
    ];
    if db.backend == Backend::Postgres {
        env.push(("TE_SECRET_ENCRYPTION_KEY".into(), SECRET_KEY.into()));
        // TE_TEST_PGBOUNCER_URL (scripts/test sets it for a second pass of the PostgreSQL tests):
        // the server reaches its database through a transaction-mode PgBouncer, with LISTEN
        // on a connection of its own straight to PostgreSQL, as docs/operations.md says.
        if let Some(pooled) = db.pooled_url() {
            env[0].1 = pooled;
            env.push(("TE_DATABASE_LISTEN_URL".into(), db.url.clone()));
        }
    }
    // Every receiver, broker and Redis of the tests is on loopback, which the service refuses
    // by default; a test that sets an egress list of its own gets exactly that.
    if !options.env.contains_key("TE_EGRESS_DENY") && !options.env.contains_key("TE_EGRESS_ALLOW") {
        env.push(("TE_EGRESS_ALLOW".into(), "127.0.0.0/8,::1/128".into()));
    }
    env.retain(|(k, _)| !options.without.contains(&k.as_str()) && !options.env.contains_key(k));
    env.extend(options.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// A `taskexec` command with only the given environment (nothing inherited that starts with TE_).
pub fn command(args: &[&str], env: &[(String, String)], dir: &std::path::Path) -> Command {
    let mut command = Command::new(binary());
    command.args(args).current_dir(dir);
    for (key, _) in std::env::vars() {
        if key.starts_with("TE_") {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command
}

fn capture(stream: impl std::io::Read + Send + 'static, output: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            output.lock().unwrap().push(line);
        }
    });
}

impl Server {
    /// The process id, for reading its memory from /proc (`host/benches/engine.rs`; no test
    /// reads it).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn start(db: &TestDb) -> Self {
        Self::start_with(db, ServerOptions::new()).await
    }

    pub async fn start_with(db: &TestDb, options: ServerOptions) -> Self {
        let env = base_env(db, &options);
        let mut child = command(&["serve"], &env, db.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("taskexec starts");
        let output = Arc::new(Mutex::new(Vec::new()));
        capture(child.stdout.take().unwrap(), output.clone());
        capture(child.stderr.take().unwrap(), output.clone());

        let mut ready = None;
        let mut exited = None;
        wait_for(options.ready, Duration::from_secs(60), || {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some(status);
                return true;
            }
            ready = output.lock().unwrap().iter().find_map(|line| {
                let v: Value = serde_json::from_str(line).ok()?;
                (v["message"] == options.ready).then(|| v["addr"].as_str().unwrap_or_default().to_owned())
            });
            ready.is_some()
        })
        .await;
        if let Some(status) = exited {
            panic!("taskexec exited with {status} before it was ready:\n{}", output.lock().unwrap().join("\n"));
        }
        Self { child, base_url: format!("http://{}", ready.unwrap()), output }
    }

    pub fn client(&self) -> Client {
        Client::new(&self.base_url, Some(API_KEY))
    }

    pub fn output_text(&self) -> String {
        self.output.lock().unwrap().join("\n")
    }

    /// Kill with SIGKILL: no shutdown, no last writes.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Send SIGTERM and wait for the exit; the exit status and everything the process wrote.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let status = self.child.wait().expect("the process exits");
        std::thread::sleep(Duration::from_millis(50));
        (status, self.output_text())
    }

    /// Send SIGTERM and wait up to `limit` for the exit: the status and how long it took, or
    /// None if the process was still running at `limit` (it is then killed).
    pub async fn terminate_within(mut self, limit: Duration) -> Option<(std::process::ExitStatus, Duration)> {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let started = std::time::Instant::now();
        while started.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some((status, started.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Stop with SIGTERM and wait for the process to exit.
    pub fn stop(mut self) -> String {
        let pid = self.child.id();
        let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        let _ = self.child.wait();
        // Let the reader threads drain what the process wrote last.
        std::thread::sleep(Duration::from_millis(50));
        self.output_text()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

/// One API response: status, headers, and the JSON body (Null when empty).
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Response {
    /// Assert docs/api.md's error shape and code; return the message.
    #[track_caller]
    pub fn error(&self, status: u16, code: &str) -> String {
        assert_eq!(self.status.as_u16(), status, "status of {}", self.text);
        assert_eq!(self.body["error"]["code"], code, "code of {}", self.text);
        let request_id = self.body["error"]["request_id"].as_str().expect("error.request_id");
        assert_eq!(self.headers["x-request-id"], request_id, "x-request-id header matches the body");
        self.body["error"]["message"].as_str().expect("error.message").to_owned()
    }
}

impl Client {
    pub fn new(base: &str, key: Option<&str>) -> Self {
        Self { http: reqwest::Client::new(), base: base.to_owned(), key: key.map(str::to_owned) }
    }

    pub fn with_key(&self, key: Option<&str>) -> Self {
        Self { key: key.map(str::to_owned), ..self.clone() }
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Response {
        self.send_with(method, path, body, &[]).await
    }

    /// [`Client::send`] with request headers of its own.
    pub async fn send_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Response {
        let mut request = self.http.request(method, format!("{}{}", self.base, path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        Self::read(request.send().await.expect("the request is sent")).await
    }

    pub async fn send_raw(&self, method: Method, path: &str, content_type: Option<&str>, body: Vec<u8>) -> Response {
        let mut request = self.http.request(method, format!("{}{}", self.base, path)).body(body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        Self::read(request.send().await.expect("the request is sent")).await
    }

    async fn read(response: reqwest::Response) -> Response {
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a body");
        let body = if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::Null) };
        Response { status, headers, body, text }
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: &Value) -> Response {
        self.send(Method::POST, path, Some(body)).await
    }
    pub async fn put(&self, path: &str, body: &Value) -> Response {
        self.send(Method::PUT, path, Some(body)).await
    }
    pub async fn delete(&self, path: &str) -> Response {
        self.send(Method::DELETE, path, None).await
    }

    /// POST that must create (201); returns the body.
    pub async fn create(&self, path: &str, body: &Value) -> Value {
        let r = self.post(path, body).await;
        assert_eq!(r.status, StatusCode::CREATED, "POST {path}: {}", r.text);
        r.body
    }

    /// Follow cursors through a whole list; returns every item and the number of pages.
    pub async fn list_all(&self, path: &str, limit: u32) -> (Vec<Value>, usize) {
        let (mut items, mut pages, mut cursor) = (Vec::new(), 0, None::<String>);
        loop {
            let url = match &cursor {
                None => format!("{path}?limit={limit}"),
                Some(c) => format!("{path}?limit={limit}&cursor={c}"),
            };
            let r = self.get(&url).await;
            assert_eq!(r.status, StatusCode::OK, "GET {url}: {}", r.text);
            pages += 1;
            items.extend(r.body["items"].as_array().unwrap().iter().cloned());
            match r.body["cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return (items, pages),
            }
        }
    }
}
