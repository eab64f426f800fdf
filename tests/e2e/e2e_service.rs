//! Start-up: configuration errors, generated keys in embedded mode, refusals with PostgreSQL,
//! `taskexec migrate`, and `--help`.

use std::process::Stdio;

use crate::support::server::{base_env, command, API_KEY};
use crate::support::{Backend, Client, Server, ServerOptions, TestDb};

fn run(db: &TestDb, args: &[&str], options: ServerOptions) -> (bool, String) {
    let out = command(args, &base_env(db, &options), db.dir.path()).stdin(Stdio::null()).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn generated_key(output: &str) -> Option<String> {
    output.split_whitespace().find(|w| w.starts_with("te_") && w.len() > 40).map(str::to_owned)
}

/// Embedded mode only: PostgreSQL never generates keys (see the next test).
#[tokio::test]
async fn embedded_mode_generates_an_api_key_once_and_a_private_key_file() {
    let db = TestDb::new(Backend::Sqlite).await;
    let options = ServerOptions::new().without("TE_API_KEYS");
    let server = Server::start_with(&db, options.clone()).await;
    let key = generated_key(&server.output_text()).expect("the generated key is printed");
    let api = Client::new(&server.base_url, Some(&key));
    api.create("/configs", &serde_json::json!({"name": "c", "values": {}})).await;
    api.with_key(Some(API_KEY)).get("/configs").await.error(401, "UNAUTHORIZED");
    let first_run = server.stop();
    assert_eq!(first_run.matches(&key).count(), 1, "printed exactly once");

    use std::os::unix::fs::PermissionsExt;
    let key_file = db.dir.path().join("taskexec.db.key");
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(first_run.contains("generated a secret encryption key"), "{first_run}");

    // A restart keeps the key (only its hash is stored) and prints nothing new.
    let server = Server::start_with(&db, options).await;
    assert_eq!(generated_key(&server.output_text()), None);
    assert_eq!(Client::new(&server.base_url, Some(&key)).get("/configs/c").await.status, 200);
    let second_run = server.stop();
    assert!(!second_run.contains("generated a secret encryption key"));
    assert!(!second_run.contains(&key));
}

/// PostgreSQL only: a shared database must never get a key one server invented.
#[tokio::test]
async fn postgres_refuses_to_start_without_keys() {
    let db = TestDb::new(Backend::Postgres).await;
    let (ok, out) = run(&db, &["serve"], ServerOptions::new().without("TE_SECRET_ENCRYPTION_KEY"));
    assert!(!ok);
    assert!(out.contains("TE_SECRET_ENCRYPTION_KEY is not set"), "{out}");
    let (ok, out) = run(&db, &["serve"], ServerOptions::new().without("TE_API_KEYS"));
    assert!(!ok);
    assert!(out.contains("TE_API_KEYS is not set"), "{out}");
}

#[tokio::test]
async fn bad_configuration_stops_start_up_naming_the_variable() {
    let db = TestDb::new(Backend::Sqlite).await;
    for (variable, value) in [
        ("TE_DB_POOL_SIZE", "lots"),
        ("TE_DB_POOL_SIZE", "0"),
        ("TE_LISTEN_ADDR", "not-an-address"),
        ("TE_WORKER_MAX_CONCURRENT", "-3"),
        ("TE_MAX_BODY_BYTES", "12"),
        ("TE_ROLES", "api,janitor"),
        ("TE_LOG_FORMAT", "xml"),
        ("TE_DATABASE_URL", "mysql://user:pw@h/db"),
        ("TE_SECRET_ENCRYPTION_KEY", "too-short"),
        ("TE_API_KEYS", "zq9xk"),
    ] {
        let (ok, out) = run(&db, &["serve"], ServerOptions::new().env(variable, value));
        assert!(!ok, "{variable}={value} was accepted");
        assert!(out.contains(variable), "{variable}={value}: {out}");
        if variable == "TE_SECRET_ENCRYPTION_KEY" || variable == "TE_API_KEYS" {
            assert!(!out.contains(value), "the rejected secret was echoed: {out}");
        }
        if variable == "TE_DATABASE_URL" {
            assert!(!out.contains("pw@"), "credentials echoed: {out}");
        }
    }
}

/// An address in use stops start-up before anything else happens: no database file, no key
/// file, the variable named once.
#[tokio::test]
async fn an_address_in_use_stops_start_up_before_any_file_is_made() {
    let db = TestDb::new(Backend::Sqlite).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (ok, out) = run(&db, &["serve"], ServerOptions::new().env("TE_LISTEN_ADDR", &addr));
    assert!(!ok, "started on an address in use");
    assert!(out.contains("TE_LISTEN_ADDR") && out.contains(&addr), "{out}");
    assert!(!db.dir.path().join("taskexec.db").exists(), "the database file was made first");
    assert!(!db.dir.path().join("taskexec.db.key").exists(), "the key file was made first");
}

#[tokio::test]
async fn help_describes_the_configuration() {
    let db = TestDb::new(Backend::Sqlite).await;
    let (ok, top) = run(&db, &["--help"], ServerOptions::new());
    assert!(ok);
    for word in ["serve", "migrate", "secrets"] {
        assert!(top.contains(word), "{top}");
    }
    let (ok, serve) = run(&db, &["serve", "--help"], ServerOptions::new());
    assert!(ok);
    for variable in [
        "TE_LISTEN_ADDR",
        "TE_DATABASE_URL",
        "TE_DB_POOL_SIZE",
        "TE_API_KEYS",
        "TE_SECRET_ENCRYPTION_KEY",
        "TE_MAX_BODY_BYTES",
        "TE_WORKER_MAX_CONCURRENT",
        "TE_WORKER_POLL_INTERVAL_MS",
        "TE_CONFIG_CACHE_TTL_SEC",
        "TE_SECRET_CACHE_TTL_SEC",
        "TE_WORKER_SHUTDOWN_TIMEOUT_SEC",
        "TE_CRON_TICK_INTERVAL_SEC",
        "TE_CRON_BATCH_SIZE",
        "TE_PROMOTE_INTERVAL_MS",
        "TE_RECLAIM_INTERVAL_SEC",
        "TE_WORKER_LEASE_SEC",
    ] {
        assert!(serve.contains(variable), "serve --help lacks {variable}");
    }
    // Values of secret variables are never shown, even when set.
    let (_, serve) = run(&db, &["serve", "--help"], ServerOptions::new().env("TE_API_KEYS", "visible-key-0123456789"));
    assert!(!serve.contains("visible-key-0123456789"));
}

/// Settings that contradict each other stop start-up, naming both variables.
#[tokio::test]
async fn contradictory_settings_are_refused_naming_both_variables() {
    let db = TestDb::new(Backend::Sqlite).await;
    let options = ServerOptions::new().env("TE_WORKER_LEASE_SEC", "10").env("TE_STUCK_EXECUTION_TIMEOUT_SEC", "3");
    let (ok, out) = run(&db, &["serve"], options);
    assert!(!ok, "{out}");
    assert!(
        out.contains("TE_WORKER_LEASE_SEC=10") && out.contains("TE_STUCK_EXECUTION_TIMEOUT_SEC: 3 disagrees"),
        "{out}"
    );
}

#[tokio::test]
async fn migrate_creates_the_schema_on_both_backends_and_is_repeatable() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let db = TestDb::new(backend).await;
        for _ in 0..2 {
            let (ok, out) = run(&db, &["migrate"], ServerOptions::new());
            assert!(ok, "{backend:?}: {out}");
            assert!(out.contains("Migrations applied."), "{out}");
            // The second run's idempotent DDL ("relation … already exists, skipping") is no
            // log line of the service's.
            assert!(!out.contains("already exists"), "a PostgreSQL notice was logged: {out}");
            if matches!(backend, Backend::Postgres) {
                // Warned at start when PostgreSQL's autovacuum is off, and only then (this
                // machine's server may have it either way; the private one of e2e_chaos has it on).
                let off = db.texts("SHOW autovacuum").await == ["off"];
                assert_eq!(out.contains("autovacuum is off"), off, "{out}");
            }
        }
        // Every table of the schema exists (inserting the seed row again conflicts).
        db.execute(
            "SELECT count(*) FROM payload_specs, configs, secrets, endpoints, jobs, executions, attempts,
             execution_logs, region_heartbeats, region_status, endpoint_secret_refs, api_keys",
        )
        .await;
        // A server started with TE_NO_MIGRATE on the migrated database works.
        let server = Server::start_with(&db, ServerOptions::new().env("TE_NO_MIGRATE", "true")).await;
        assert_eq!(server.client().get("/configs").await.status, 200);
    }
}

/// Several processes migrating one fresh PostgreSQL database at once: one migrates while the
/// others wait on the lock row (the same lock CockroachDB uses, which has no advisory locks),
/// and every one succeeds.
#[tokio::test]
async fn concurrent_migrations_take_turns() {
    let db = TestDb::new(Backend::Postgres).await;
    let runs: Vec<_> = (0..4)
        .map(|_| {
            command(&["migrate"], &base_env(&db, &ServerOptions::new()), db.dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Each one's output is read as it comes (one thread each): a process whose pipe is not
    // read blocks once the pipe is full, and if it holds the migration lock, the others wait
    // on it for ever.
    let readers: Vec<_> =
        runs.into_iter().map(|run| std::thread::spawn(move || run.wait_with_output().unwrap())).collect();
    for reader in readers {
        let out = reader.join().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
    }
    assert_eq!(db.scalar("SELECT COUNT(*) FROM te_migration_lock").await, 0, "the lock was released");
    assert_eq!(db.scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE NOT success").await, 0);
}

/// A database that applied migration 0005 as released (one transaction; rewritten since as
/// one schema change per transaction for CockroachDB) still starts: its checksum is accepted.
#[tokio::test]
async fn a_database_migrated_with_the_released_0005_still_starts() {
    let db = TestDb::new(Backend::Postgres).await;
    let (ok, out) = run(&db, &["migrate"], ServerOptions::new());
    assert!(ok, "{out}");
    let released = "8a518a6ce78db9d223f8a173e68f8a25262f243b14989701ea24820ed0a1ead85391ab9429eecea1ca1d059d669929af";
    db.execute(&format!("UPDATE _sqlx_migrations SET checksum = decode('{released}', 'hex') WHERE version = 5")).await;
    let (ok, out) = run(&db, &["migrate"], ServerOptions::new());
    assert!(ok, "{out}");
    assert!(out.contains("its checksum was updated"), "{out}");
    let server = Server::start_with(&db, ServerOptions::new().env("TE_NO_MIGRATE", "true")).await;
    assert_eq!(server.client().get("/endpoints").await.status, 200);
}

/// `docker-compose.yml`'s three taskexec services, started as compose starts them — no
/// container engine runs here, so as processes: the image's command (the Dockerfile's
/// `ENTRYPOINT` and `CMD`), each service's merged environment with only the addresses moved to
/// this machine (the database to the test's PostgreSQL, ports to free ones), the API first
/// (it migrates) and the others once it passes its health check (`depends_on:
/// service_healthy`). Each must pass its own health check, and together they must deliver.
#[tokio::test]
async fn the_compose_services_start_and_deliver_as_written() {
    use serde_json::json;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut compose: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root.join("docker-compose.yml")).unwrap()).unwrap();
    compose.apply_merge().unwrap();
    let compose: serde_json::Value = serde_json::to_value(compose).unwrap();
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let exec_form = |instruction: &str| -> Vec<String> {
        let line = dockerfile.lines().rfind(|l| l.starts_with(instruction)).unwrap();
        serde_json::from_str(line[instruction.len()..].trim()).unwrap()
    };
    assert_eq!(exec_form("ENTRYPOINT"), ["taskexec"]);
    let args = exec_form("CMD");
    assert_eq!(args, ["serve"], "the services run the image's command");
    let runtime_stage = dockerfile.rsplit("FROM ").next().unwrap();

    let db = TestDb::new(Backend::Postgres).await;
    let receiver = crate::support::Receiver::start().await;
    let mut running = Vec::new();
    let mut api_url = String::new();
    for name in ["api", "scheduler", "worker"] {
        let service = &compose["services"][name];
        assert_eq!(service["image"], "taskexec:local", "{name} runs the image built from this repository");
        if name != "api" {
            assert_eq!(service["depends_on"]["api"]["condition"], "service_healthy", "{name}");
        }
        let mut options = ServerOptions::new();
        let mut health_port = None;
        for (key, value) in service["environment"].as_object().unwrap() {
            let value = value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
            let value = match key.as_str() {
                // CockroachDB in the stack; this machine's PostgreSQL here (the same wire protocol).
                "TE_DATABASE_URL" => {
                    assert!(value.starts_with("postgres://"), "{value}");
                    db.url.clone()
                }
                "TE_HEALTH_ADDR" => {
                    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
                    health_port = Some((value.rsplit(':').next().unwrap().to_owned(), port));
                    format!("127.0.0.1:{port}")
                }
                _ => value,
            };
            options = options.env(key, &value);
        }
        let roles = options.env["TE_ROLES"].clone();
        let ready = match roles.as_str() {
            "api" => "Listening.",
            "scheduler" => "Scheduler running.",
            "worker" => "Worker running.",
            other => panic!("{name}: unexpected TE_ROLES {other}"),
        };
        let options = ServerOptions { ready, ..options };
        let server = Server::start_with(&db, options).await;
        if name == "api" {
            api_url = server.base_url.clone();
        }
        // Its health check, with the port it listens on here.
        let test: Vec<String> = serde_json::from_value(service["healthcheck"]["test"].clone()).unwrap();
        assert_eq!(test[..3], ["CMD", "curl", "-fsS"], "{name}: {test:?}");
        assert!(runtime_stage.contains("curl"), "the runtime image installs curl for the health checks");
        let port = match &health_port {
            Some((written, port)) => (written.clone(), port.to_string()),
            None => ("8080".to_owned(), server.base_url.rsplit(':').next().unwrap().to_owned()),
        };
        let url = test[3].replace(&format!(":{}/", port.0), &format!(":{}/", port.1));
        let answer = reqwest::get(&url).await.unwrap();
        assert!(answer.status().is_success(), "{name}'s health check {url}: {}", answer.status());
        running.push(server);
    }

    let key = compose["services"]["api"]["environment"]["TE_API_KEYS"].as_str().unwrap();
    let api = Client::new(&api_url, Some(key));
    api.create(
        "/endpoints",
        &json!({"name": "hook", "type": "HTTP", "spec": {"url": format!("{}/ok/hook", receiver.base_url), "method": "POST"}}),
    )
    .await;
    // The worker delivers; the scheduler promotes the delayed one.
    for job in [
        json!({"endpoint": "hook", "trigger": "IMMEDIATE", "idempotency_key": "now"}),
        json!({"endpoint": "hook", "trigger": "DELAYED", "idempotency_key": "later", "delay_ms": 300}),
    ] {
        let created = api.create("/jobs", &job).await;
        crate::support::fixtures::wait_for_status(
            &api,
            created["execution"]["execution_id"].as_str().unwrap(),
            "SUCCESS",
        )
        .await;
    }
    assert_eq!(receiver.count_of("/ok/hook"), 2);
    drop(running);
}
