//! `taskexec plugin …`: install and manage plugins through the REST API; the offline author
//! tools (`check`, `run`, `new`, `wit`) are `plugin_dev`'s.

use anyhow::Context;

use super::client::{print_json, print_table, text, Api};
use crate::config::PluginCommand;

pub async fn run(command: PluginCommand) -> anyhow::Result<()> {
    match command {
        PluginCommand::Install { file, name, allow_host, memory_mb, calls_per_instance, world, api } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let api = Api::new(api)?;
            let mut query = vec![("name".to_owned(), name)];
            query.extend(allow_host.into_iter().map(|h| ("allow_host".to_owned(), h)));
            query.extend(memory_mb.map(|m| ("memory_mb".to_owned(), m.to_string())));
            query.extend(calls_per_instance.map(|n| ("calls_per_instance".to_owned(), n.to_string())));
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
            let items = Api::new(api)?.list_all("/plugins", &[]).await?;
            print_table(
                &items,
                &[
                    ("NAME", |p| text(&p["name"])),
                    ("VERSION", |p| text(&p["version"])),
                    ("WORLD", |p| text(&p["world"])),
                    ("BYTES", |p| text(&p["size_bytes"])),
                    ("SHA256", |p| text(&p["sha256"])),
                ],
            );
            Ok(())
        }
        PluginCommand::Show { name, api } => {
            let api = Api::new(api)?;
            let (_, body) = api.send(api.http.get(format!("{}/plugins/{name}", api.url))).await?;
            print_json(&body);
            Ok(())
        }
        PluginCommand::Remove { name, version: None, api } => {
            let api = Api::new(api)?;
            api.send(api.http.delete(format!("{}/plugins/{name}", api.url))).await?;
            println!("Removed plugin {name}.");
            Ok(())
        }
        PluginCommand::Remove { name, version: Some(version), api } => {
            let api = Api::new(api)?;
            api.send(api.http.delete(format!("{}/plugins/{name}/versions/{version}", api.url))).await?;
            println!("Removed version {version} of plugin {name}.");
            Ok(())
        }
        PluginCommand::Rollback { name, to, api } => {
            let api = Api::new(api)?;
            let body = match to {
                Some(version) => serde_json::json!({ "to": version }),
                None => serde_json::json!({}),
            };
            let (_, record) = api.post(&format!("/plugins/{name}/rollback"), &body).await?;
            println!(
                "Rolled back plugin {name}: version {} is the component of an earlier version (sha256 {}).",
                record["version"],
                record["sha256"].as_str().unwrap_or("")
            );
            Ok(())
        }
        PluginCommand::Check { file, world } => super::plugin_dev::check(&file, world.as_deref()),
        PluginCommand::Run {
            file,
            spec,
            input,
            config,
            secrets,
            allow_host,
            timeout_ms,
            memory_mb,
            answer,
            after,
            ticks,
        } => {
            let args = super::plugin_dev::RunArgs {
                file: &file,
                spec: &spec,
                input: &input,
                config: &config,
                secrets: &secrets,
                allow_host: &allow_host,
                timeout_ms,
                memory_mb,
                answer: answer.as_deref(),
                after: after.as_deref(),
                ticks,
            };
            if super::plugin_dev::run(args).await? {
                Ok(())
            } else {
                // The failure was printed; the exit status says it.
                std::process::exit(1)
            }
        }
        PluginCommand::New { name, world, dir } => super::plugin_dev::new(&name, &world, &dir),
        PluginCommand::Wit { dir } => super::plugin_dev::write_wit(&dir),
    }
}
