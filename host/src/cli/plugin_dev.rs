//! `taskexec plugin check|run|new|wit`: a plugin author's tools, offline. No server, no
//! database: `check` type-checks a component, `run` calls it in the same sandbox the service
//! uses, `new` starts a crate, `wit` writes the contract.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

use super::embedded;
use crate::contract::{FailureKind, Message};
use crate::plugin::limits::InstallLimits;
use crate::plugin::outbound::Egress;
use crate::plugin::{Grants, PluginLimits, PluginRuntime, World};
use crate::secret::SecretValue;
use crate::template::{CompiledTemplate, RenderContext};

fn runtime() -> anyhow::Result<Arc<PluginRuntime>> {
    PluginRuntime::new(None, crate::plugin::limits::DEFAULT_MEMORY_MB_MAX).map_err(anyhow::Error::msg)
}

fn read(file: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}

/// What each import a component may have is for.
fn import_purpose(import: &str) -> &'static str {
    let name = import.split('@').next().unwrap_or(import);
    match name {
        "taskexec:plugin/host" => "log records, kept with the execution's logs",
        "taskexec:plugin/types" => "the message, receipt and failure types",
        "taskexec:plugin/specs" => "the built-in endpoint specs as records, read by the host from their JSON",
        "taskexec:plugin/kafka" => "producing to Kafka through the host's producers, only to brokers granted with --allow-host kafka://…",
        "taskexec:plugin/redis-streams" => {
            "appending to Redis Streams through the host's connections, only to servers granted with --allow-host redis://…"
        }
        "taskexec:plugin/http-client" => "outbound HTTP in one call, only to the hosts granted with --allow-host",
        "wasi:http/outgoing-handler" => "outbound HTTP, only to the hosts granted with --allow-host",
        "wasi:http/types" => "HTTP requests and responses",
        "wasi:io/poll" | "wasi:io/streams" | "wasi:io/error" => "streams and waiting, under HTTP bodies",
        "wasi:clocks/monotonic-clock" | "wasi:clocks/wall-clock" => "the time",
        "wasi:random/random" | "wasi:random/insecure" | "wasi:random/insecure-seed" => "random numbers",
        "wasi:cli/environment" => "environment variables and arguments: always empty in the sandbox",
        "wasi:cli/exit" => "exiting: ends the call as a failure",
        "wasi:cli/stdin" | "wasi:cli/stdout" | "wasi:cli/stderr" => {
            "standard streams: output is kept as log records, input is empty"
        }
        "wasi:filesystem/types" | "wasi:filesystem/preopens" => "files: none are open in the sandbox",
        n if n.starts_with("wasi:cli/terminal-") => "whether a stream is a terminal: never in the sandbox",
        _ => "offered by the host",
    }
}

/// `plugin check FILE [--world W]`.
pub fn check(file: &Path, world: Option<&str>) -> anyhow::Result<()> {
    let claimed = match world {
        None => None,
        Some(w) => Some(World::parse(w).with_context(|| {
            format!("--world must be transport-plugin, renderer-plugin, classifier-plugin or schedule-plugin, not {w}")
        })?),
    };
    let bytes = read(file)?;
    let (inspection, _) =
        runtime()?.inspect(&bytes, claimed).map_err(|message| anyhow::anyhow!("{}: {message}", file.display()))?;
    println!("{}: a valid {} component", file.display(), inspection.world.as_str());
    println!("exports:");
    for export in &inspection.exports {
        println!("  {export}");
    }
    println!("imports:");
    let width = inspection.imports.iter().map(String::len).max().unwrap_or(0);
    for import in &inspection.imports {
        println!("  {import:width$}  {}", import_purpose(import));
    }
    Ok(())
}

/// What `plugin run` is given.
pub struct RunArgs<'a> {
    pub file: &'a Path,
    pub spec: &'a str,
    pub input: &'a str,
    pub config: &'a str,
    pub secrets: &'a [String],
    pub allow_host: &'a [String],
    pub timeout_ms: u64,
    pub memory_mb: Option<u32>,
    /// A classifier's answer to judge (JSON: `status`, `headers`, `body`).
    pub answer: Option<&'a str>,
    /// A schedule's starting local time (`YYYY-MM-DDTHH:MM:SS`), and how many ticks to list.
    pub after: Option<&'a str>,
    pub ticks: usize,
}

fn json_arg(flag: &str, text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{flag} is not JSON"))
}

/// `plugin run FILE --spec JSON …`: whether the delivery (or render) succeeded.
pub async fn run(args: RunArgs<'_>) -> anyhow::Result<bool> {
    let spec = json_arg("--spec", args.spec)?;
    let input = json_arg("--input", args.input)?;
    let config = json_arg("--config", args.config)?;
    let mut secrets = BTreeMap::new();
    for pair in args.secrets {
        // The value is never echoed: only what comes before any `=`.
        let (name, value) =
            pair.split_once('=').with_context(|| format!("--secret takes NAME=VALUE, got '{pair}' with no `=`"))?;
        secrets.insert(name.to_owned(), SecretValue::new(value.to_owned()));
    }
    let context = RenderContext { input, config, secrets };
    let bytes = read(args.file)?;
    let runtime = runtime()?;
    let (inspection, _) =
        runtime.inspect(&bytes, None).map_err(|message| anyhow::anyhow!("{}: {message}", args.file.display()))?;
    let sha = format!("local-{}", bytes.len());
    let loaded = runtime.load(&sha, || Some(bytes)).map_err(anyhow::Error::msg)?;
    let asked = InstallLimits { memory_mb: args.memory_mb, calls_per_instance: None };
    let limits = PluginLimits::for_install(asked, runtime.memory_mb_max)
        .map_err(|e| anyhow::anyhow!("--{}: {}", e.field.replace('_', "-"), e.message))?;

    match inspection.world {
        World::Classifier => return classify(&runtime, &loaded, &limits, &args, &context.config).await,
        World::Schedule => return ticks(&runtime, &loaded, &limits, &args, &spec).await,
        World::Transport | World::Renderer => {}
    }
    if inspection.world == World::Renderer {
        let rendered = runtime
            // As the service calls a renderer plugin: no secrets reach it.
            .render(
                &loaded,
                &limits,
                spec.to_string(),
                Some(serde_json::json!({"input": context.input, "config": context.config, "secret": {}}).to_string()),
            )
            .await
            .map_err(|e| anyhow::anyhow!("render failed: {}", e.message))?;
        println!("{rendered}");
        return Ok(true);
    }
    if let Err(message) = runtime.validate(&loaded, &limits, spec.to_string()).await.map_err(anyhow::Error::msg)? {
        bail!("validate refused the spec: {message}");
    }
    eprintln!("validate: the spec is accepted");
    let rendered = CompiledTemplate::compile(&spec)
        .map_err(|e| anyhow::anyhow!("`{}`: {}", e.field, e.message))?
        .render(&context)
        .map_err(|e| anyhow::anyhow!("rendering the spec failed: {}", e.message))?;
    let grants = Grants::parse(args.allow_host).map_err(anyhow::Error::msg)?;
    // Kafka and Redis through clients of this run's own, as the service would use its pooled ones.
    let egress = Arc::new(Egress::new(Arc::new(grants)).with_pooled(crate::transport::PooledTransports::default()));
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let deadline =
        chrono::Utc::now() + chrono::Duration::milliseconds(i64::try_from(args.timeout_ms).unwrap_or(i64::MAX / 2));
    let message = Message {
        execution_id: "exec_local".to_owned(),
        attempt: 1,
        idempotency_key: "exec_local".to_owned(),
        deadline_ms: u64::try_from(deadline.timestamp_millis()).unwrap_or(0),
        spec_json: rendered.to_string(),
    };
    let outcome = runtime.deliver(&loaded, &Default::default(), &egress, &limits, message, timeout, None).await;
    for (level, line) in &outcome.logs.records {
        eprintln!("[plugin {level}] {line}");
    }
    for denial in &outcome.denials {
        eprintln!("[denied] {denial}");
    }
    match outcome.result {
        Ok(receipt) => {
            let output: Value =
                serde_json::from_str(&receipt.output_json).unwrap_or(Value::String(receipt.output_json));
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({"delivered": true, "output": output}))?);
            Ok(true)
        }
        Err(failure) => {
            let kind = match failure.kind {
                FailureKind::Timeout => "timeout".to_owned(),
                FailureKind::Connection => "connection".to_owned(),
                FailureKind::Rejected(Some(status)) => format!("rejected ({status})"),
                FailureKind::Rejected(None) => "rejected".to_owned(),
                FailureKind::InvalidSpec => "invalid-spec".to_owned(),
                FailureKind::Internal => "internal".to_owned(),
            };
            let mut message = failure.message;
            if let Some(target) = outcome.ungranted.first() {
                message = format!("{message}; not granted {target}: run again with --allow-host {target}");
            }
            let shown = serde_json::json!({
                "delivered": false,
                "failure": {"kind": kind, "retryable": failure.retryable && outcome.ungranted.is_empty(),
                            "message": message, "retry_after_ms": failure.retry_after_ms},
            });
            println!("{}", serde_json::to_string_pretty(&shown)?);
            Ok(false)
        }
    }
}

/// `plugin run` of a classifier: the verdict on `--answer`, as JSON.
async fn classify(
    runtime: &PluginRuntime,
    loaded: &crate::plugin::Loaded,
    limits: &PluginLimits,
    args: &RunArgs<'_>,
    config: &Value,
) -> anyhow::Result<bool> {
    use crate::contract::{Answer, Verdict};
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AnswerArg {
        status: Option<u16>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
        #[serde(default)]
        body: String,
    }
    let text = args.answer.context(
        "a classifier judges an answer: give --answer '{\"status\": 200, \"headers\": {…}, \"body\": \"…\"}'",
    )?;
    let given: AnswerArg = serde_json::from_str(text).context("--answer")?;
    if let Err(message) = runtime.check_classifier_config(loaded, limits, config.to_string()).await? {
        bail!("check refused the config: {message}");
    }
    let answer = Answer {
        endpoint_type: "HTTP".to_owned(),
        attempt: 1,
        status: given.status,
        headers: given.headers.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect(),
        outcome: Ok(serde_json::json!({"status_code": given.status, "body": given.body}).to_string()),
        body: given.body.into_bytes(),
        config_json: config.to_string(),
    };
    let outcome = runtime.classify(loaded, limits, answer, crate::worker::classify::CLASSIFY_CPU).await;
    for (level, line) in &outcome.logs.records {
        eprintln!("[{level}] {line}");
    }
    let shown = match outcome.result.map_err(|why| anyhow::anyhow!("no verdict: {why}"))? {
        Verdict::Keep => serde_json::json!({"verdict": "keep"}),
        Verdict::Success => serde_json::json!({"verdict": "success"}),
        Verdict::Retry(r) => serde_json::json!({"verdict": "retry", "message": r.message, "after_ms": r.after_ms}),
        Verdict::Permanent(message) => serde_json::json!({"verdict": "permanent", "message": message}),
        Verdict::OpenCircuit(o) => {
            serde_json::json!({"verdict": "open_circuit", "message": o.message, "cooldown_ms": o.cooldown_ms})
        }
    };
    println!("{}", serde_json::to_string_pretty(&shown)?);
    Ok(true)
}

/// `plugin run` of a schedule: its next `--ticks` local times after `--after`, one a line.
async fn ticks(
    runtime: &PluginRuntime,
    loaded: &crate::plugin::Loaded,
    limits: &PluginLimits,
    args: &RunArgs<'_>,
    spec: &Value,
) -> anyhow::Result<bool> {
    use chrono::Timelike;
    let spec_json = spec.to_string();
    if let Err(message) = runtime.check_schedule(loaded, limits, spec_json.clone()).await? {
        bail!("check refused the spec: {message}");
    }
    let mut at = match args.after {
        Some(text) => chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S")
            .with_context(|| format!("--after takes a local time as YYYY-MM-DDTHH:MM:SS, got '{text}'"))?,
        None => chrono::Utc::now().naive_utc().with_nanosecond(0).expect("0 is valid"),
    };
    for _ in 0..args.ticks {
        let after = crate::scheduler::ticks::local_time(at);
        let next = runtime
            .schedule_next(loaded, limits, &spec_json, after, crate::scheduler::ticks::NEXT_CPU)
            .await
            .map_err(anyhow::Error::msg)?;
        let Some(next) = next else {
            println!("(no more ticks)");
            break;
        };
        let next = crate::scheduler::ticks::naive(&next)
            .with_context(|| format!("the plugin answered {next:?}, which is no date and time"))?;
        if next <= at {
            bail!("the plugin answered {next}, which is not after {at}");
        }
        println!("{}", next.format("%Y-%m-%dT%H:%M:%S %a"));
        at = next;
    }
    eprintln!("(local times: the service places them in the job's timezone, skipping a spring-forward gap)");
    Ok(true)
}

/// `plugin wit DIR`.
pub fn write_wit(dir: &Path) -> anyhow::Result<()> {
    for (path, text) in embedded::WIT {
        write(&dir.join(path), text)?;
    }
    println!("Wrote the taskexec:plugin@0.1.0 WIT package ({} files) to {}.", embedded::WIT.len(), dir.display());
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `plugin new NAME [--world W] [--dir D]`.
pub fn new(name: &str, world: &str, dir: &Path) -> anyhow::Result<()> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        bail!("the plugin's name must be lowercase letters, digits and hyphens, got '{name}'");
    }
    let root = dir.join(name);
    if root.exists() {
        bail!("{} already exists", root.display());
    }
    let crate_name = name.replace('-', "_");
    let lib = match world {
        "transport" | "transport-plugin" => TRANSPORT_LIB,
        "renderer" | "renderer-plugin" => RENDERER_LIB,
        "classifier" | "classifier-plugin" => CLASSIFIER_LIB,
        "schedule" | "schedule-plugin" => SCHEDULE_LIB,
        other => bail!("--world must be transport, renderer, classifier or schedule, not {other}"),
    };
    // Every world is written on the SDK, which carries the WIT it is built against.
    for (path, text) in embedded::SDK_SOURCES {
        write(&root.join("taskexec-plugin-sdk/src").join(path), text)?;
    }
    write(&root.join("taskexec-plugin-sdk/Cargo.toml"), embedded::SDK_MANIFEST)?;
    for (path, text) in embedded::WIT {
        write(&root.join("taskexec-plugin-sdk/wit").join(path), text)?;
    }
    let manifest = MANIFEST.replace("{name}", name);
    write(&root.join("Cargo.toml"), &manifest)?;
    write(&root.join("src/lib.rs"), &lib.replace("{name}", name))?;
    write(&root.join(".gitignore"), "/target\n")?;
    println!("Created {} ({world} plugin). Next:", root.display());
    println!("  cd {}", root.display());
    println!("  cargo test --lib                                  # the pure logic, on this machine");
    println!("  cargo build --release --target wasm32-wasip2     # rustup target add wasm32-wasip2, once");
    println!("  taskexec plugin run target/wasm32-wasip2/release/{crate_name}.wasm --spec '{{…}}' --input '{{…}}'");
    println!("  taskexec plugin install target/wasm32-wasip2/release/{crate_name}.wasm --name {name}");
    Ok(())
}

const MANIFEST: &str = r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"

# A component is a cdylib. `cargo test --lib` runs the pure logic's tests on this machine
# (a whole `cargo test` would also link the component natively, which cannot work).
[lib]
crate-type = ["cdylib"]

[dependencies]
taskexec-plugin-sdk = { path = "taskexec-plugin-sdk" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"

# Small components: they are stored in the database and compiled by every worker.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A crate of its own, not a member of any workspace around it.
[workspace]
"#;

const TRANSPORT_LIB: &str = r#"//! `{name}`: a Task Executor transport plugin.
//!
//! Endpoint spec: `{"url": "https://…", "text": "{{input.text}}"}`. Each delivery POSTs
//! `{"text": …}` to `url`; 2xx is a success, 408/429/5xx are retried, other answers fail.

use serde::Deserialize;
use taskexec_plugin_sdk::{export, http, log, spec, Failure, Message, Receipt, Transport};

/// What `POST /endpoints` takes as `spec` for this plugin.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    /// Where to send: install the plugin with `--allow-host` for it.
    url: String,
    /// What to send; templates such as `{{input.text}}` are rendered before delivery.
    text: String,
}

struct Plugin;

impl Transport for Plugin {
    /// At registration, before templates are rendered: refuse a spec that can never work.
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Spec = spec::parse(&spec_json)?;
        if !spec::is_template(&spec.url) {
            http::check_url(&spec.url).map_err(|e| format!("`url`: {e}"))?;
        }
        Ok(())
    }

    /// Once per attempt, in a fresh instance, with the spec rendered.
    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let spec: Spec = spec::for_delivery(&message)?;
        let answer = http::post(&spec.url)
            .header("idempotency-key", &message.idempotency_key)
            .json(&body(&spec.text))
            .send()?;
        log::info(&format!("{} answered {}", spec.url, answer.status));
        answer.receipt()
    }
}

/// The request body: plain logic, tested with `cargo test --lib`.
fn body(text: &str) -> serde_json::Value {
    serde_json::json!({ "text": text })
}

export!(Plugin);

#[cfg(test)]
mod tests {
    #[test]
    fn the_body_carries_the_text() {
        assert_eq!(super::body("hello")["text"], "hello");
    }
}
"#;

const RENDERER_LIB: &str = r#"//! `{name}`: a Task Executor renderer plugin: renders endpoint specs in place of the built-in
//! `{{ }}` renderer. This one replaces `$input.NAME` strings with the input's value.

use serde_json::Value;
use taskexec_plugin_sdk::renderer::{export, RenderError, Renderer};

struct Plugin;

fn render(template: &Value, context: &Value) -> Result<Value, RenderError> {
    Ok(match template {
        Value::String(s) => match s.strip_prefix("$input.") {
            Some(name) => context["input"]
                .get(name)
                .cloned()
                .ok_or_else(|| RenderError::unresolved(format!("`input.{name}` is not defined"), format!("input.{name}")))?,
            None => template.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, context)).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| Ok((k.clone(), render(v, context)?))).collect::<Result<_, _>>()?)
        }
        other => other.clone(),
    })
}

impl Renderer for Plugin {
    /// At registration: refuse a template this plugin cannot render.
    fn check(template_json: String) -> Result<(), RenderError> {
        serde_json::from_str::<Value>(&template_json).map(drop).map_err(|e| RenderError::new(e.to_string()))
    }

    /// Once per attempt, with the job's input and the endpoint's config (never secrets).
    fn render(template_json: String, context_json: String) -> Result<String, RenderError> {
        let parse = |text: &str| serde_json::from_str::<Value>(text).map_err(|e| RenderError::new(e.to_string()));
        Ok(render(&parse(&template_json)?, &parse(&context_json)?)?.to_string())
    }
}

export!(Plugin);
"#;

const CLASSIFIER_LIB: &str = r##"//! `{name}`: a Task Executor classifier plugin: judges a receiver's answer after delivery.
//! This one fails an HTTP 2xx answer whose body contains `"error"`, and retries it in 5 s.

use taskexec_plugin_sdk::classifier::{export, Answer, Classifier, Retry, Verdict};

struct Plugin;

/// The verdict on an answer: plain logic, tested with `cargo test --lib`.
fn judge(status: Option<u16>, body: &[u8]) -> Verdict {
    let Some(200..=299) = status else { return Verdict::Keep };
    if String::from_utf8_lossy(body).contains("\"error\"") {
        return Verdict::Retry(Retry { message: "the body reports an error".into(), after_ms: Some(5000) });
    }
    Verdict::Keep
}

impl Classifier for Plugin {
    /// At registration: refuse a `classifier.config` this plugin cannot use.
    fn check(config_json: String) -> Result<(), String> {
        serde_json::from_str::<serde_json::Value>(&config_json).map(drop).map_err(|e| e.to_string())
    }

    /// Once per attempt, after the transport.
    fn classify(answer: Answer) -> Verdict {
        judge(answer.status, &answer.body)
    }
}

export!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_in_a_2xx_body_is_retried() {
        let retry = Verdict::Retry(Retry { message: "the body reports an error".into(), after_ms: Some(5000) });
        assert_eq!(judge(Some(200), br#"{"error": "busy"}"#), retry);
        assert_eq!(judge(Some(200), br#"{"ok": true}"#), Verdict::Keep);
        assert_eq!(judge(Some(500), br#"{"error": "x"}"#), Verdict::Keep);
    }
}
"##;

const SCHEDULE_LIB: &str = r##"//! `{name}`: a Task Executor schedule plugin: computes a CRON job's ticks in local time.
//! This one fires at 12:00 on the first day of each month (the spec is not read).

use taskexec_plugin_sdk::schedule::{export, LocalTime, Schedule};

struct Plugin;

/// The first noon on a 1st strictly after `after`: plain logic, tested with `cargo test --lib`.
/// The host places it in the job's timezone; the weekday it returns is not read.
fn next_noon_on_the_first(after: &LocalTime) -> LocalTime {
    let noon = LocalTime { day: 1, hour: 12, minute: 0, second: 0, ..*after };
    if (after.day, after.hour) < (1, 12) {
        return noon;
    }
    match after.month {
        12 => LocalTime { year: after.year + 1, month: 1, ..noon },
        month => LocalTime { month: month + 1, ..noon },
    }
}

impl Schedule for Plugin {
    /// When a job is created or updated: refuse a spec this plugin cannot use.
    fn check(spec_json: String) -> Result<(), String> {
        serde_json::from_str::<serde_json::Value>(&spec_json).map(drop).map_err(|e| e.to_string())
    }

    /// For each tick: the first local time strictly after `after` (None: no more ticks).
    fn next(_spec_json: String, after: LocalTime) -> Result<Option<LocalTime>, String> {
        Ok(Some(next_noon_on_the_first(&after)))
    }
}

export!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_first_of_the_month_at_noon() {
        let at = |month, day, hour| LocalTime { year: 2026, month, day, hour, minute: 0, second: 0, weekday: 1 };
        assert_eq!(next_noon_on_the_first(&at(3, 1, 9)), LocalTime { hour: 12, ..at(3, 1, 9) });
        assert_eq!(next_noon_on_the_first(&at(3, 1, 12)).month, 4);
        assert_eq!(next_noon_on_the_first(&at(12, 5, 0)).year, 2027);
    }
}
"##;
