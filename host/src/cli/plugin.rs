//! `taskexec plugin …`: install and manage plugins through the REST API, and check a
//! component offline.

use anyhow::{bail, Context};
use serde_json::Value;

use crate::config::{ApiArgs, PluginCommand};
use crate::plugin::{PluginRuntime, World};

struct Api {
    http: reqwest::Client,
    url: String,
    key: String,
}

impl Api {
    fn new(args: ApiArgs) -> anyhow::Result<Self> {
        let key = args
            .api_key
            .context("TE_API_KEY is not set: pass --api-key or set TE_API_KEY to one of the service's API keys")?;
        Ok(Self { http: reqwest::Client::new(), url: args.url.trim_end_matches('/').to_owned(), key })
    }

    /// Send, and turn an error answer into an error that quotes the service's message.
    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let response = request
            .bearer_auth(&self.key)
            .send()
            .await
            .with_context(|| format!("cannot reach the service at {}", self.url))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let message = body["error"]["message"].as_str().map(str::to_owned).unwrap_or(text);
            let code = body["error"]["code"].as_str().unwrap_or("ERROR");
            bail!("{status} {code}: {message}");
        }
        Ok((status, body))
    }
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

pub async fn run(command: PluginCommand) -> anyhow::Result<()> {
    match command {
        PluginCommand::Install { file, name, allow_host, memory_mb, world, api } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let api = Api::new(api)?;
            let mut query = vec![("name".to_owned(), name)];
            query.extend(allow_host.into_iter().map(|h| ("allow_host".to_owned(), h)));
            query.extend(memory_mb.map(|m| ("memory_mb".to_owned(), m.to_string())));
            query.extend(world.map(|w| ("world".to_owned(), w)));
            let request = api
                .http
                .post(format!("{}/plugins", api.url))
                .query(&query)
                .header("content-type", "application/wasm")
                .body(bytes);
            let (status, body) = api.send(request).await?;
            let verb = if status == reqwest::StatusCode::CREATED { "Installed" } else { "Already installed:" };
            println!(
                "{verb} {} version {} ({}, sha256 {})",
                body["name"].as_str().unwrap_or(""),
                body["version"],
                body["world"].as_str().unwrap_or(""),
                body["sha256"].as_str().unwrap_or("")
            );
            Ok(())
        }
        PluginCommand::List { api } => {
            let api = Api::new(api)?;
            let (_, body) = api.send(api.http.get(format!("{}/plugins?limit=200", api.url))).await?;
            println!("{:<24} {:>7}  {:<18} {:>10}  sha256", "NAME", "VERSION", "WORLD", "BYTES");
            for p in body["items"].as_array().into_iter().flatten() {
                println!(
                    "{:<24} {:>7}  {:<18} {:>10}  {}",
                    p["name"].as_str().unwrap_or(""),
                    p["version"],
                    p["world"].as_str().unwrap_or(""),
                    p["size_bytes"],
                    p["sha256"].as_str().unwrap_or("")
                );
            }
            Ok(())
        }
        PluginCommand::Show { name, api } => {
            let api = Api::new(api)?;
            let (_, body) = api.send(api.http.get(format!("{}/plugins/{name}", api.url))).await?;
            print_json(&body);
            Ok(())
        }
        PluginCommand::Remove { name, api } => {
            let api = Api::new(api)?;
            api.send(api.http.delete(format!("{}/plugins/{name}", api.url))).await?;
            println!("Removed plugin {name}.");
            Ok(())
        }
        PluginCommand::Check { file, world } => {
            let claimed = match world.as_deref() {
                None => None,
                Some(w) => Some(
                    World::parse(w)
                        .with_context(|| format!("--world must be transport-plugin or renderer-plugin, not {w}"))?,
                ),
            };
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let runtime =
                PluginRuntime::new(None, crate::plugin::limits::DEFAULT_MEMORY_MB_MAX).map_err(anyhow::Error::msg)?;
            let (inspection, _) =
                runtime.inspect(&bytes, claimed).map_err(|message| anyhow::anyhow!("{}: {message}", file.display()))?;
            println!("{}: a valid {} component", file.display(), inspection.world.as_str());
            println!("exports:");
            for export in &inspection.exports {
                println!("  {export}");
            }
            println!("imports:");
            for import in &inspection.imports {
                println!("  {import}");
            }
            Ok(())
        }
    }
}
