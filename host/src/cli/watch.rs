//! `taskexec jobs watch ID`: follow a job's executions as they change. Each change is a line
//! (time, execution, old → new status, attempts, the error when it failed); on a terminal a
//! progress line below them counts the executions by status. A one-shot job's watch ends with
//! its execution: exit 0 on SUCCESS, an error otherwise; a cron job's runs until Ctrl-C.
//!
//! It asks the API every `interval` (the executions list), rather than holding a stream open.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::bail;
use serde_json::Value;

use super::client::{text, Api};

const TERMINAL: [&str; 3] = ["SUCCESS", "FAILED", "CANCELLED"];

pub async fn watch(api: &Api, job_id: &str, interval: Duration) -> anyhow::Result<()> {
    let job = api.get(&format!("/jobs/{job_id}")).await?;
    let one_shot = job["trigger"] != "CRON";
    println!("Watching {} job {job_id} for endpoint {}.", text(&job["trigger"]), text(&job["endpoint"]));
    let progress = std::io::stdout().is_terminal();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let executions = api.list_all(&format!("/jobs/{job_id}/executions"), &[]).await?;
        for execution in &executions {
            let id = text(&execution["execution_id"]);
            let status = text(&execution["status"]);
            let before = seen.insert(id.clone(), status.clone());
            if before.as_deref() == Some(status.as_str()) {
                continue;
            }
            if progress {
                print!("\r\x1b[2K");
            }
            let change = match before {
                Some(before) => format!("{before} → {status}"),
                None => status.clone(),
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
        }
        if progress {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for status in seen.values() {
                *counts.entry(status.as_str()).or_default() += 1;
            }
            let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
            print!("\r\x1b[2K{} executions: {}", seen.len(), summary.join(", "));
            std::io::stdout().flush().ok();
        }
        if one_shot {
            if let Some(last) = executions.last().filter(|e| TERMINAL.contains(&e["status"].as_str().unwrap_or(""))) {
                if progress {
                    println!();
                }
                return finished(last);
            }
        }
        tokio::time::sleep(interval).await;
    }
}

fn finished(execution: &Value) -> anyhow::Result<()> {
    match execution["status"].as_str() {
        Some("SUCCESS") => Ok(()),
        _ => bail!("execution {} ended {}", text(&execution["execution_id"]), text(&execution["status"])),
    }
}
