//! `taskexec endpoints|configs|secrets|specs|jobs|executions …`: the REST API's resources from
//! the command line, as tables for people or the API's JSON (`--json`) for scripts.

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::client::{print_json, print_table, read_body, text, Api, Column};
use crate::config::{ApiArgs, BodyArgs, ExecutionsCommand, JobFlags, JobsCommand, OutputArgs, ResourceCommand};

/// A named resource: where it lives in the API, what one is called, and its table.
pub struct Resource {
    pub path: &'static str,
    pub noun: &'static str,
    pub columns: &'static [Column],
}

fn updated(v: &Value) -> String {
    text(&v["updated_at"])
}

pub const ENDPOINTS: Resource = Resource {
    path: "/endpoints",
    noun: "endpoint",
    columns: &[
        ("NAME", |v| text(&v["name"])),
        ("TYPE", |v| text(&v["type"])),
        ("VERSION", |v| text(&v["version"])),
        ("CONFIG", |v| text(&v["config"])),
        ("PLUGIN", |v| text(&v["plugin"])),
        ("CIRCUIT", |v| {
            if v["disabled_at"].is_string() {
                "disabled".to_owned()
            } else if v["paused_at"].is_string() {
                "paused".to_owned()
            } else {
                text(&v["circuit"]["state"])
            }
        }),
        ("UPDATED", updated),
    ],
};

pub const CONFIGS: Resource = Resource {
    path: "/configs",
    noun: "config",
    columns: &[
        ("NAME", |v| text(&v["name"])),
        ("KEYS", |v| {
            v["values"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>().join(",")).unwrap_or_default()
        }),
        ("UPDATED", updated),
    ],
};

pub const SECRETS: Resource =
    Resource { path: "/secrets", noun: "secret", columns: &[("NAME", |v| text(&v["name"])), ("UPDATED", updated)] };

pub const SPECS: Resource = Resource {
    path: "/payload-specs",
    noun: "payload spec",
    columns: &[("NAME", |v| text(&v["name"])), ("UPDATED", updated)],
};

const JOB_COLUMNS: &[Column] = &[
    ("JOB", |v| text(&v["job_id"])),
    ("ENDPOINT", |v| text(&v["endpoint"])),
    ("TRIGGER", |v| text(&v["trigger"])),
    ("STATUS", |v| text(&v["status"])),
    ("SCHEDULE", |v| match v["cron"].as_str() {
        Some(cron) => format!("{cron} ({})", text(&v["timezone"])),
        None => text(&v["run_at"]),
    }),
    ("CREATED", |v| text(&v["created_at"])),
];

const EXECUTION_COLUMNS: &[Column] = &[
    ("EXECUTION", |v| text(&v["execution_id"])),
    ("STATUS", |v| text(&v["status"])),
    ("WHY", |v| text(&v["trigger_reason"])),
    ("ENDPOINT", |v| text(&v["endpoint"])),
    ("ATTEMPTS", |v| format!("{}/{}", text(&v["attempt_count"]), text(&v["max_attempts"]))),
    ("RUN AT", |v| text(&v["run_at"])),
    ("DURATION", |v| v["duration_ms"].as_i64().map(|ms| format!("{ms} ms")).unwrap_or_default()),
    ("ERROR", |v| text(&v["output"]["error"]["message"])),
];

const ATTEMPT_COLUMNS: &[Column] = &[
    ("#", |v| text(&v["attempt_number"])),
    ("STATUS", |v| text(&v["status"])),
    ("STARTED", |v| text(&v["started_at"])),
    ("DURATION", |v| v["duration_ms"].as_i64().map(|ms| format!("{ms} ms")).unwrap_or_default()),
    ("ERROR", |v| match v["error"].is_null() {
        true => String::new(),
        false => format!("{}: {}", text(&v["error"]["type"]), text(&v["error"]["message"])),
    }),
];

const LOG_COLUMNS: &[Column] = &[
    ("TIME", |v| text(&v["logged_at"])),
    ("ATTEMPT", |v| text(&v["attempt_number"])),
    ("LEVEL", |v| text(&v["level"])),
    ("MESSAGE", |v| text(&v["message"])),
];

fn show_list(items: &[Value], output: &OutputArgs, columns: &[Column]) {
    if output.json {
        print_json(&Value::Array(items.to_vec()));
    } else {
        print_table(items, columns);
    }
}

pub async fn resource(resource: &Resource, command: ResourceCommand) -> anyhow::Result<()> {
    let Resource { path, noun, columns } = resource;
    match command {
        ResourceCommand::Create { body: BodyArgs { file, output, api } } => {
            let body = read_body(&file)?;
            let api = Api::new(api)?;
            let (status, created) = api.post(path, &body).await?;
            if output.json {
                print_json(&created);
            } else if status == reqwest::StatusCode::CREATED {
                println!("Created {noun} {}.", text(&created["name"]));
            } else {
                println!("The {noun} {} already exists with this content.", text(&created["name"]));
            }
        }
        ResourceCommand::List { output, api } => {
            let items = Api::new(api)?.list_all(path, &[]).await?;
            show_list(&items, &output, columns);
        }
        ResourceCommand::Get { name, api } => print_json(&Api::new(api)?.get(&format!("{path}/{name}")).await?),
        ResourceCommand::Update { name, body: BodyArgs { file, output, api } } => {
            let body = read_body(&file)?;
            let updated = Api::new(api)?.put(&format!("{path}/{name}"), &body).await?;
            if output.json {
                print_json(&updated);
            } else {
                println!("Updated {noun} {name}.");
            }
        }
        ResourceCommand::Delete { name, api } => {
            Api::new(api)?.delete(&format!("{path}/{name}")).await?;
            println!("Deleted {noun} {name}.");
        }
    }
    Ok(())
}

/// `taskexec endpoints enable|pause|resume NAME`.
pub async fn endpoint_action(name: &str, action: &str, output: &OutputArgs, api: ApiArgs) -> anyhow::Result<()> {
    let endpoint = Api::new(api)?.post(&format!("/endpoints/{name}/{action}"), &json!({})).await?.1;
    if output.json {
        print_json(&endpoint);
        return Ok(());
    }
    match action {
        "enable" => println!("Enabled endpoint {name}: its circuit is {}.", text(&endpoint["circuit"]["state"])),
        "pause" => println!(
            "Paused endpoint {name} (since {}): its executions wait until `taskexec endpoints resume {name}`.",
            text(&endpoint["paused_at"])
        ),
        _ => println!("Resumed endpoint {name}: its waiting executions are delivered."),
    }
    Ok(())
}

/// The `POST /jobs` body the flags describe.
fn job_body(job: JobFlags) -> anyhow::Result<Value> {
    if let Some(file) = &job.file {
        return read_body(file);
    }
    let input: Value = match &job.input {
        Some(text) => serde_json::from_str(text).context("--input is not JSON")?,
        None => json!({}),
    };
    let mut body = json!({"endpoint": job.endpoint, "input": input});
    let schedule = match (job.cron, job.schedule) {
        (Some(cron), _) => Some(("cron", json!(cron))),
        (None, Some(plugin)) => {
            let spec: Value = match &job.spec {
                Some(text) => serde_json::from_str(text).context("--spec is not JSON")?,
                None => json!({}),
            };
            Some(("schedule", json!({"plugin": plugin, "spec": spec})))
        }
        (None, None) if job.timezone != "UTC" => bail!("--tz applies to a CRON job: give --cron or --schedule"),
        (None, None) if job.jitter_ms.is_some() => {
            bail!("--jitter-ms applies to a CRON job: give --cron or --schedule")
        }
        (None, None) => None,
    };
    if let Some((field, value)) = schedule {
        body["trigger"] = json!("CRON");
        body[field] = value;
        body["timezone"] = json!(job.timezone);
        if let Some(jitter) = job.jitter_ms {
            body["jitter_ms"] = json!(jitter);
        }
        if let Some(key) = job.key {
            body["idempotency_key"] = json!(key);
        }
        return Ok(body);
    }
    body["trigger"] = json!(if job.run_at.is_some() || job.delay_ms.is_some() { "DELAYED" } else { "IMMEDIATE" });
    if let Some(run_at) = job.run_at {
        body["run_at"] = json!(run_at);
    }
    if let Some(delay) = job.delay_ms {
        body["delay_ms"] = json!(delay);
    }
    // A one-shot job needs a key: a new one per invocation unless --key makes a retried
    // command idempotent.
    body["idempotency_key"] = json!(job.key.unwrap_or_else(|| format!("cli-{}", uuid::Uuid::new_v4().simple())));
    Ok(body)
}

pub async fn jobs(command: JobsCommand) -> anyhow::Result<()> {
    match command {
        JobsCommand::Create { job, output, api } => {
            let body = job_body(job)?;
            let (status, created) = Api::new(api)?.post("/jobs", &body).await?;
            if output.json {
                print_json(&created);
            } else {
                let verb = if status == reqwest::StatusCode::CREATED { "Created" } else { "Already created:" };
                let next = match (created["next_run_at"].as_str(), created["execution"]["execution_id"].as_str()) {
                    (Some(next), _) => format!("next tick {next}"),
                    (None, Some(execution)) => {
                        format!("execution {execution} {}", text(&created["execution"]["status"]))
                    }
                    _ => String::new(),
                };
                println!("{verb} {} job {}: {next}", text(&created["trigger"]), text(&created["job_id"]));
            }
        }
        JobsCommand::List { endpoint, status, trigger, output, api } => {
            let query: Vec<(&str, String)> = [("endpoint", endpoint), ("status", status), ("trigger", trigger)]
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect();
            let items = Api::new(api)?.list_all("/jobs", &query).await?;
            show_list(&items, &output, JOB_COLUMNS);
        }
        JobsCommand::Get { job_id, api } => print_json(&Api::new(api)?.get(&format!("/jobs/{job_id}")).await?),
        JobsCommand::Status { job_id, api } => {
            print_json(&Api::new(api)?.get(&format!("/jobs/{job_id}/status")).await?)
        }
        JobsCommand::Upcoming { job_id, limit, api } => {
            let listed = Api::new(api)?.get(&format!("/jobs/{job_id}/upcoming?limit={limit}")).await?;
            let ticks = listed["ticks"].as_array().cloned().unwrap_or_default();
            if ticks.is_empty() {
                let why = if listed["paused"] == true { "it is paused" } else { "its schedule has no more" };
                println!("Job {job_id} has no upcoming ticks: {why}.");
            }
            for tick in ticks {
                // `fires_at` has milliseconds; without jitter it is `at` to the millisecond.
                let on_time = text(&tick["at"]).replace('Z', ".000Z");
                let jittered = if tick["fires_at"].as_str().is_some_and(|fires| fires != on_time) {
                    format!(", fires {}", text(&tick["fires_at"]))
                } else {
                    String::new()
                };
                println!("{}  {} ({}){jittered}", text(&tick["at"]), text(&tick["local"]), text(&listed["timezone"]));
            }
        }
        JobsCommand::Executions { job_id, status, output, api } => {
            let query: Vec<(&str, String)> = status.map(|s| ("status", s)).into_iter().collect();
            let items = Api::new(api)?.list_all(&format!("/jobs/{job_id}/executions"), &query).await?;
            show_list(&items, &output, EXECUTION_COLUMNS);
        }
        JobsCommand::Pause { job_id, api } => {
            let (_, job) = Api::new(api)?.post(&format!("/jobs/{job_id}/pause"), &json!({})).await?;
            println!("Job {job_id} is paused (since {}).", text(&job["paused_at"]));
        }
        JobsCommand::Resume { job_id, catch_up, api } => {
            let body = json!({ "catch_up": catch_up });
            let (_, job) = Api::new(api)?.post(&format!("/jobs/{job_id}/resume"), &body).await?;
            println!("Job {job_id} runs again; next tick {}.", text(&job["next_run_at"]));
        }
        JobsCommand::Trigger { job_id, key, api } => {
            let api = Api::new(api)?;
            let mut request = api.http.post(format!("{}/jobs/{job_id}/trigger", api.url)).json(&json!({}));
            if let Some(key) = key {
                request = request.header("Idempotency-Key", key);
            }
            let (status, execution) = api.send(request).await?;
            let verb = if status == reqwest::StatusCode::CREATED { "fired as" } else { "was already fired as" };
            println!("Job {job_id} {verb} {} ({}).", text(&execution["execution_id"]), text(&execution["status"]));
        }
        JobsCommand::Backfill { job_id, from, to, overlap_policy, api } => {
            let mut body = json!({ "from": from, "to": to });
            if let Some(policy) = overlap_policy {
                body["overlap_policy"] = json!(policy);
            }
            let (_, filled) = Api::new(api)?.post(&format!("/jobs/{job_id}/backfill"), &body).await?;
            let ticks = filled["ticks"].as_array().cloned().unwrap_or_default();
            println!("Job {job_id}: {} of the range's {} ticks made now.", filled["created"], ticks.len());
            for tick in ticks {
                let made = if tick["created"] == true { "made" } else { "already made" };
                println!("{}  {} {} ({made})", text(&tick["at"]), text(&tick["execution_id"]), text(&tick["status"]));
            }
        }
        JobsCommand::Cancel { job_id, api } => {
            let api = Api::new(api)?;
            let (_, job) = api.post(&format!("/jobs/{job_id}/cancel"), &json!({})).await?;
            match job["execution"]["status"].as_str() {
                Some(status) => println!("Job {job_id}: its execution is {status}."),
                None => println!("Job {job_id} is {}.", text(&job["status"])),
            }
        }
        JobsCommand::Watch { job_id, api } => super::watch::watch(&Api::new(api)?, &job_id).await?,
    }
    Ok(())
}

pub async fn executions(command: ExecutionsCommand) -> anyhow::Result<()> {
    match command {
        ExecutionsCommand::List { filter, limit, output, api } => {
            let items = Api::new(api)?.list_up_to("/executions", &filter.fields(), limit).await?;
            show_list(&items, &output, EXECUTION_COLUMNS);
        }
        ExecutionsCommand::Retry { execution_id, api } => {
            let (status, retry) = Api::new(api)?.post(&format!("/executions/{execution_id}/retry"), &json!({})).await?;
            let verb = if status == 201 { "is retried as" } else { "was already retried as" };
            println!("Execution {execution_id} {verb} {} ({}).", text(&retry["execution_id"]), text(&retry["status"]));
        }
        ExecutionsCommand::Replay { filter, limit, api } => {
            let mut body = json!({ "limit": limit });
            for (name, value) in filter.fields() {
                body[name] = json!(value);
            }
            let (_, answer) = Api::new(api)?.post("/executions/replay", &body).await?;
            println!("Queued {} retries.", text(&answer["queued"]));
        }
        ExecutionsCommand::Get { execution_id, api } => {
            print_json(&Api::new(api)?.get(&format!("/executions/{execution_id}")).await?)
        }
        ExecutionsCommand::Attempts { execution_id, output, api } => {
            let items = Api::new(api)?.list_all(&format!("/executions/{execution_id}/attempts"), &[]).await?;
            show_list(&items, &output, ATTEMPT_COLUMNS);
        }
        ExecutionsCommand::Logs { execution_id, output, api } => {
            let items = Api::new(api)?.list_all(&format!("/executions/{execution_id}/logs"), &[]).await?;
            show_list(&items, &output, LOG_COLUMNS);
        }
        ExecutionsCommand::Cancel { execution_id, abort, api } => {
            let query = if abort { "?running=abort" } else { "" };
            let path = format!("/executions/{execution_id}/cancel{query}");
            let (status, execution) = Api::new(api)?.post(&path, &json!({})).await?;
            if status == hyper::StatusCode::ACCEPTED {
                println!("Execution {execution_id} is RUNNING; its worker is asked to abort it.");
            } else {
                println!("Execution {execution_id} is {}.", text(&execution["status"]));
            }
        }
    }
    Ok(())
}
