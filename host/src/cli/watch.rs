//! `taskexec jobs watch ID`: follow a job's executions through `GET /jobs/{id}/events`
//! (server-sent events). Each change is a line (time, execution, old → new status, attempts,
//! the error when it failed); on a terminal a progress line below them counts the executions by
//! status. A one-shot job's watch ends with its execution: exit 0 on SUCCESS, an error
//! otherwise; a cron job's runs until Ctrl-C.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use anyhow::{bail, Context};
use serde_json::Value;

use super::client::{text, Api};

pub async fn watch(api: &Api, job_id: &str) -> anyhow::Result<()> {
    let job = api.get(&format!("/jobs/{job_id}")).await?;
    println!("Watching {} job {job_id} for endpoint {}.", text(&job["trigger"]), text(&job["endpoint"]));
    let (_, response) = api.open(api.http.get(format!("{}/jobs/{job_id}/events", api.url))).await?;
    let mut response = response;
    let progress = std::io::stdout().is_terminal();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut last: Option<Value> = None;
    let mut buffer = String::new();
    while let Some(chunk) = response.chunk().await.context("the event stream broke off")? {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        // Events end with a blank line; a partial one waits for the next chunk.
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut kind, mut data) = ("message", String::new());
            for line in block.lines() {
                if let Some(k) = line.strip_prefix("event:") {
                    kind = k.trim();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            match kind {
                "execution" => {
                    let execution: Value = serde_json::from_str(&data).context("an event that is not JSON")?;
                    show(&execution, &mut seen, progress);
                    last = Some(execution);
                }
                "end" => {
                    if progress {
                        println!();
                    }
                    return finished(last.as_ref());
                }
                _ => {}
            }
        }
    }
    bail!("the service closed the event stream")
}

fn show(execution: &Value, seen: &mut BTreeMap<String, String>, progress: bool) {
    let id = text(&execution["execution_id"]);
    let status = text(&execution["status"]);
    let before = seen.insert(id.clone(), status.clone());
    if progress {
        print!("\r\x1b[2K");
    }
    let change = match before {
        Some(before) if before != status => format!("{before} → {status}"),
        _ => status.clone(),
    };
    let error = match execution["output"]["error"]["message"].as_str() {
        Some(message) if status != "SUCCESS" => format!(" — {message}"),
        _ => String::new(),
    };
    println!(
        "{} {id} {change} (attempt {}/{}){error}",
        chrono::Utc::now().format("%H:%M:%S"),
        text(&execution["attempt_count"]),
        text(&execution["max_attempts"])
    );
    if progress {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for status in seen.values() {
            *counts.entry(status.as_str()).or_default() += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        print!("{} executions: {}", seen.len(), summary.join(", "));
        std::io::stdout().flush().ok();
    }
}

fn finished(execution: Option<&Value>) -> anyhow::Result<()> {
    match execution {
        Some(e) if e["status"] == "SUCCESS" => Ok(()),
        Some(e) => bail!("execution {} ended {}", text(&e["execution_id"]), text(&e["status"])),
        None => bail!("the job's stream ended without an execution"),
    }
}
