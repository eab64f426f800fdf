//! The REST API as the client commands use it: TE_URL, TE_API_KEY (and TE_WITHIN_TENANT), errors that quote the
//! service's own message, lists followed through every page, and tables for people.

use anyhow::{bail, Context};
use serde_json::Value;

use crate::config::ApiArgs;

pub struct Api {
    pub http: reqwest::Client,
    pub url: String,
    key: String,
    /// The tenant an operator key acts within (`--within-tenant`).
    within_tenant: Option<String>,
}

impl Api {
    pub fn new(args: ApiArgs) -> anyhow::Result<Self> {
        let key = args
            .api_key
            .context("TE_API_KEY is not set: pass --api-key or set TE_API_KEY to one of the service's API keys")?;
        Ok(Self {
            http: reqwest::Client::new(),
            url: args.url.trim_end_matches('/').to_owned(),
            key,
            within_tenant: args.within_tenant,
        })
    }

    /// Send, and turn an error answer into an error that quotes the service's message.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let (status, response) = self.open(request).await?;
        let text = response.text().await.unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// Send, and hand back a successful answer unread (a stream, say); an error answer becomes
    /// an error that quotes the service's message.
    pub async fn open(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<(reqwest::StatusCode, reqwest::Response)> {
        let request = match &self.within_tenant {
            Some(tenant) => request.header(crate::api::auth::TENANT_HEADER, tenant),
            None => request,
        };
        let response = request
            .bearer_auth(&self.key)
            .send()
            .await
            .with_context(|| format!("cannot reach the service at {}", self.url))?;
        let status = response.status();
        if status.is_success() {
            return Ok((status, response));
        }
        let text = response.text().await.unwrap_or_default();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = body["error"]["message"].as_str().map(str::to_owned).unwrap_or(text);
        let code = body["error"]["code"].as_str().unwrap_or("ERROR");
        bail!("{status} {code}: {message}");
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        Ok(self.send(self.http.get(format!("{}{path}", self.url))).await?.1)
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        self.send(self.http.post(format!("{}{path}", self.url)).json(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        Ok(self.send(self.http.put(format!("{}{path}", self.url)).json(body)).await?.1)
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<()> {
        self.send(self.http.delete(format!("{}{path}", self.url))).await.map(drop)
    }

    /// Every item of a list, following its cursors; `query` holds the list's filters.
    pub async fn list_all(&self, path: &str, query: &[(&str, String)]) -> anyhow::Result<Vec<Value>> {
        self.list_up_to(path, query, usize::MAX).await
    }

    /// The first `most` items of a list (all of them, if fewer), following its cursors.
    pub async fn list_up_to(&self, path: &str, query: &[(&str, String)], most: usize) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut params: Vec<(&str, String)> = query.to_vec();
            params.push(("limit", "200".into()));
            if let Some(c) = &cursor {
                params.push(("cursor", c.clone()));
            }
            let request = self.http.get(format!("{}{path}", self.url)).query(&params);
            let (_, page) = self.send(request).await?;
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["cursor"].as_str() {
                Some(next) if items.len() < most => cursor = Some(next.to_owned()),
                _ => {
                    items.truncate(most);
                    return Ok(items);
                }
            }
        }
    }
}

/// A JSON body from FILE, or standard input for `-`.
pub fn read_body(file: &std::path::Path) -> anyhow::Result<Value> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read standard input")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))
}

pub fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

/// One column of a table: its header and how to show an item's cell.
pub type Column = (&'static str, fn(&Value) -> String);

/// The text of a field: strings bare, null empty, anything else as JSON.
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Print `items` as a table with aligned columns (the last column is not padded).
pub fn print_table(items: &[Value], columns: &[Column]) {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, cell)| cell(item).replace(['\n', '\t'], " ")).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (header, _))| rows.iter().map(|r| r[i].chars().count()).chain([header.len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        let padded: Vec<String> = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| if i == last { c } else { format!("{c:<width$}", width = widths[i]) })
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns.iter().map(|(h, _)| (*h).to_owned()).collect());
    for row in rows {
        line(row);
    }
}
