//! `taskexec tenants …` and `taskexec api-keys …`: the tenants, and the keys issued to them with
//! a role, through the REST API.

use serde_json::{json, Value};

use super::client::{print_json, print_table, text, Api, Column};
use crate::config::{ApiKeysCommand, TenantsCommand};

const TENANT_COLUMNS: &[Column] = &[("TENANT", |v| text(&v["name"])), ("CREATED", |v| text(&v["created_at"]))];

const KEY_COLUMNS: &[Column] = &[
    ("KEY", |v| text(&v["key_id"])),
    ("ROLE", |v| text(&v["role"])),
    ("LABEL", |v| text(&v["label"])),
    ("CREATED", |v| text(&v["created_at"])),
    ("REVOKED", |v| text(&v["revoked_at"])),
];

fn show(items: Vec<Value>, json: bool, columns: &[Column]) {
    if json {
        print_json(&Value::Array(items));
    } else {
        print_table(&items, columns);
    }
}

pub async fn tenants(command: TenantsCommand) -> anyhow::Result<()> {
    match command {
        TenantsCommand::Create { name, api } => {
            let (status, made) = Api::new(api)?.post("/tenants", &json!({"name": name})).await?;
            let said = if status == reqwest::StatusCode::CREATED { "Made" } else { "Already had" };
            println!(
                "{said} tenant {}; issue it keys with `taskexec api-keys create --tenant {0}`.",
                text(&made["name"])
            );
        }
        TenantsCommand::List { output, api } => {
            show(Api::new(api)?.list_all("/tenants", &[]).await?, output.json, TENANT_COLUMNS);
        }
        TenantsCommand::Get { name, api } => print_json(&Api::new(api)?.get(&format!("/tenants/{name}")).await?),
    }
    Ok(())
}

pub async fn api_keys(command: ApiKeysCommand) -> anyhow::Result<()> {
    match command {
        ApiKeysCommand::Create { role, label, tenant, output, api } => {
            let path = format!("/tenants/{}/api-keys", tenant.tenant);
            let (_, made) = Api::new(api)?.post(&path, &json!({"role": role, "label": label})).await?;
            if output.json {
                print_json(&made);
            } else {
                // The key goes to standard output alone, so that `$(taskexec api-keys create …)`
                // captures it; what it is goes to standard error.
                eprintln!(
                    "Issued {} key {} to tenant {}. The key is shown only this once:",
                    text(&made["role"]),
                    text(&made["key_id"]),
                    text(&made["tenant"])
                );
                println!("{}", text(&made["key"]));
            }
        }
        ApiKeysCommand::List { tenant, output, api } => {
            let path = format!("/tenants/{}/api-keys", tenant.tenant);
            show(Api::new(api)?.list_all(&path, &[]).await?, output.json, KEY_COLUMNS);
        }
        ApiKeysCommand::Get { key_id, tenant, api } => {
            print_json(&Api::new(api)?.get(&format!("/tenants/{}/api-keys/{key_id}", tenant.tenant)).await?);
        }
        ApiKeysCommand::Revoke { key_id, tenant, api } => {
            Api::new(api)?.delete(&format!("/tenants/{}/api-keys/{key_id}", tenant.tenant)).await?;
            println!("Revoked API key {key_id}: every API process refuses it within a second.");
        }
    }
    Ok(())
}
