//! The client commands (`taskexec endpoints|configs|secrets|specs|jobs|executions …`) against a
//! real server, as a user types them.

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};

use crate::both_backends;
use crate::support::fixtures::wait_for_status;
use crate::support::server::{command, API_KEY};
use crate::support::{Backend, Receiver, Server, TestDb};

both_backends!(the_cli_manages_resources_and_follows_jobs);

/// `taskexec ARGS` with TE_URL and TE_API_KEY set and `stdin` as standard input; (exit
/// success, stdout, stderr).
fn taskexec(server: &Server, db: &TestDb, args: &[&str], stdin: &str) -> (bool, String, String) {
    let env = vec![("TE_URL".to_owned(), server.base_url.clone()), ("TE_API_KEY".to_owned(), API_KEY.to_owned())];
    let mut child = command(args, &env, db.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Run and require success; stdout.
#[track_caller]
fn ok(server: &Server, db: &TestDb, args: &[&str], stdin: &str) -> String {
    let (success, stdout, stderr) = taskexec(server, db, args, stdin);
    assert!(success, "taskexec {args:?} failed:\n{stdout}{stderr}");
    stdout
}

async fn the_cli_manages_resources_and_follows_jobs(backend: Backend) {
    let db = TestDb::new(backend).await;
    let server = Server::start(&db).await;
    let receiver = Receiver::start().await;

    // Resources from a file and from standard input; tables and JSON.
    let config = db.dir.path().join("config.json");
    std::fs::write(&config, json!({"name": "receiver", "values": {"base": receiver.base_url}}).to_string()).unwrap();
    assert_eq!(
        ok(&server, &db, &["configs", "create", "-f", config.to_str().unwrap()], ""),
        "Created config receiver.\n"
    );
    let endpoint = |name: &str, path: &str| {
        json!({"name": name, "type": "HTTP", "config": "receiver", "retry_policy": {"max_attempts": 1},
               "spec": {"url": format!("{{{{config.base}}}}{path}"), "method": "POST", "body_template": {"n": "{{input.n}}"}}})
        .to_string()
    };
    ok(&server, &db, &["endpoints", "create", "-f", "-"], &endpoint("hook", "/ok/hook"));
    ok(&server, &db, &["endpoints", "create", "-f", "-"], &endpoint("broken", "/fail/x"));
    let table = ok(&server, &db, &["endpoints", "list"], "");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME    TYPE  VERSION  CONFIG"), "{table}");
    assert!(lines[1].starts_with("hook    HTTP  1        receiver"), "columns line up: {table}");
    let listed: Value = serde_json::from_str(&ok(&server, &db, &["endpoints", "list", "--json"], "")).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    ok(&server, &db, &["secrets", "create", "-f", "-"], r#"{"name": "token", "value": "sk-cli-secret-value"}"#);
    let secrets = ok(&server, &db, &["secrets", "list"], "");
    assert!(secrets.contains("token") && !secrets.contains("sk-cli-secret-value"), "{secrets}");

    // A job by flags, followed to its end.
    let created = ok(&server, &db, &["jobs", "create", "--endpoint", "hook", "--input", r#"{"n": 7}"#], "");
    assert!(created.starts_with("Created IMMEDIATE job job_") && created.contains("QUEUED"), "{created}");
    let job_id = created.split_whitespace().nth(3).unwrap().trim_end_matches(':').to_owned();
    let watched = ok(&server, &db, &["jobs", "watch", &job_id], "");
    assert!(watched.contains("SUCCESS (attempt 1/1)"), "{watched}");
    assert_eq!(receiver.received()[0].json(), json!({"n": 7}));
    let executions: Value =
        serde_json::from_str(&ok(&server, &db, &["jobs", "executions", &job_id, "--json"], "")).unwrap();
    let execution_id = executions[0]["execution_id"].as_str().unwrap();
    let logs = ok(&server, &db, &["executions", "logs", execution_id], "");
    assert!(logs.starts_with("TIME") && logs.contains("Delivered in"), "{logs}");

    // A failing job: watch says so and exits non-zero.
    let created = ok(
        &server,
        &db,
        &["jobs", "create", "--endpoint", "broken", "--delay-ms", "10", "--input", r#"{"n": 1}"#, "--json"],
        "",
    );
    let job: Value = serde_json::from_str(&created).unwrap();
    let (success, stdout, stderr) = taskexec(&server, &db, &["jobs", "watch", job["job_id"].as_str().unwrap()], "");
    assert!(!success && stdout.contains("FAILED") && stderr.contains("ended FAILED"), "{stdout}{stderr}");

    // The dead letters, and a retry of one once its endpoint is fixed.
    let dead = ok(&server, &db, &["executions", "list", "--status", "FAILED"], "");
    assert!(dead.lines().next().unwrap().starts_with("EXECUTION"), "{dead}");
    assert_eq!(dead.lines().count(), 2, "a header and one failure: {dead}");
    assert!(dead.lines().nth(1).unwrap().contains(" scheduled "), "why it was made: {dead}");
    assert!(dead.contains("broken"), "{dead}");
    let failed_id = dead.lines().nth(1).unwrap().split_whitespace().next().unwrap().to_owned();
    ok(&server, &db, &["endpoints", "update", "broken", "-f", "-"], &endpoint("broken", "/ok/fixed"));
    let retried = ok(&server, &db, &["executions", "retry", &failed_id], "");
    assert!(retried.starts_with(&format!("Execution {failed_id} is retried as exec_")), "{retried}");
    let again = ok(&server, &db, &["executions", "retry", &failed_id], "");
    assert!(again.contains("was already retried as"), "{again}");
    let retry_id = retried.split_whitespace().nth(5).unwrap();
    let watched: Value = serde_json::from_str(&ok(&server, &db, &["executions", "get", retry_id], "")).unwrap();
    assert_eq!(watched["retry_of"], failed_id.as_str());
    // Nothing failed is left un-retried (the retry may still be running: it is not FAILED).
    assert_eq!(ok(&server, &db, &["executions", "replay", "--endpoint", "broken"], ""), "Queued 0 retries.\n");

    // A cron job in a timezone, listed by trigger, then cancelled.
    let created = ok(
        &server,
        &db,
        &["jobs", "create", "--endpoint", "hook", "--cron", "0 9 * * MON", "--tz", "Europe/Paris"],
        "",
    );
    assert!(created.starts_with("Created CRON job") && created.contains("T09:00:00+0"), "{created}");
    let crons: Value =
        serde_json::from_str(&ok(&server, &db, &["jobs", "list", "--trigger", "CRON", "--json"], "")).unwrap();
    let cron_id = crons[0]["job_id"].as_str().unwrap();
    assert_eq!(crons.as_array().unwrap().len(), 1);
    assert!(
        ok(&server, &db, &["jobs", "pause", cron_id], "").starts_with(&format!("Job {cron_id} is paused (since 20"))
    );
    let paused = ok(&server, &db, &["jobs", "upcoming", cron_id], "");
    assert_eq!(paused.trim(), format!("Job {cron_id} has no upcoming ticks: it is paused."));
    let resumed = ok(&server, &db, &["jobs", "resume", cron_id], "");
    // Mondays at 09:00 in Paris: two, each in UTC and in the job's zone.
    let upcoming = ok(&server, &db, &["jobs", "upcoming", cron_id, "--limit", "2"], "");
    let lines: Vec<&str> = upcoming.lines().collect();
    assert_eq!(lines.len(), 2, "{upcoming}");
    assert!(lines.iter().all(|l| l.contains("T09:00:00+0") && l.ends_with("(Europe/Paris)")), "{upcoming}");
    assert!(resumed.contains("runs again; next tick 20") && resumed.contains("T09:00:00+0"), "{resumed}");
    // Fired now, once per key; its past Mondays backfilled, once.
    let fired = ok(&server, &db, &["jobs", "trigger", cron_id, "--key", "deploy-7"], "");
    assert!(fired.starts_with(&format!("Job {cron_id} fired as exec_")), "{fired}");
    let again = ok(&server, &db, &["jobs", "trigger", cron_id, "--key", "deploy-7"], "");
    assert_eq!(again.split_whitespace().nth(5), fired.split_whitespace().nth(3), "{again}");
    let (from, to) = ((chrono::Utc::now() - chrono::Duration::days(14)).to_rfc3339(), chrono::Utc::now().to_rfc3339());
    let filled =
        ok(&server, &db, &["jobs", "backfill", cron_id, "--from", &from, "--to", &to, "--overlap-policy", "allow"], "");
    assert!(filled.starts_with(&format!("Job {cron_id}: 2 of the range's 2 ticks made now.")), "{filled}");
    let refilled = ok(&server, &db, &["jobs", "backfill", cron_id, "--from", &from, "--to", &to], "");
    assert!(refilled.contains(": 0 of the range's 2 ticks") && refilled.contains("(already made)"), "{refilled}");
    assert!(ok(&server, &db, &["jobs", "cancel", cron_id], "").contains("RETIRED"));

    // An execution in flight is refused a plain cancel, and aborted with --abort.
    ok(&server, &db, &["endpoints", "create", "-f", "-"], &endpoint("hangs", "/hang/cli"));
    let hung = ok(&server, &db, &["jobs", "create", "--endpoint", "hangs", "--input", r#"{"n": 2}"#, "--json"], "");
    let hung: Value = serde_json::from_str(&hung).unwrap();
    let hung_id = hung["execution"]["execution_id"].as_str().unwrap();
    wait_for_status(&server.client(), hung_id, "RUNNING").await;
    let (success, _, stderr) = taskexec(&server, &db, &["executions", "cancel", hung_id], "");
    assert!(!success && stderr.contains("EXECUTION_NOT_CANCELLABLE") && stderr.contains("running=abort"), "{stderr}");
    let aborted = ok(&server, &db, &["executions", "cancel", hung_id, "--abort"], "");
    assert_eq!(aborted, format!("Execution {hung_id} is CANCELLED.\n"));

    // Errors quote the service; completions come from the same definition.
    let (success, _, stderr) = taskexec(&server, &db, &["jobs", "create", "--endpoint", "nope"], "");
    assert!(!success && stderr.contains("ENDPOINT_NOT_FOUND") && stderr.contains("'nope'"), "{stderr}");
    let (success, _, stderr) = taskexec(&server, &db, &["configs", "delete", "receiver"], "");
    assert!(!success && stderr.contains("409 Conflict CONFLICT"), "{stderr}");
    assert!(ok(&server, &db, &["completions", "bash"], "").contains("jobs"));
}
