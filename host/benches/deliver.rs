//! Render + HTTP deliver, end to end through the built-in renderer and transport, to a local
//! receiver that answers 200 at once. Prints deliveries per second and p50/p99/max latency,
//! one connection at a time and 64 concurrent, and writes the figures as JSON. Then the same
//! HTTP delivery through the `webhook-signed` plugin (built from plugins/) against the native
//! transport sending the same request, to measure what the sandbox costs per delivery.
//!
//!     cargo bench -p taskexec --bench deliver
//!
//! Environment: BENCH_N (deliveries per scenario, default 20000), BENCH_PLUGIN_N (per plugin
//! comparison scenario, default 10000), BENCH_JSON (output path, default
//! bench-results/deliver.json).
//!
//! Last, the cost of a classifier (`plugins/json-status`) judging each answer: the native HTTP
//! delivery alone, and with the answer kept and classified, one at a time and 64 concurrent.
//!
//! And what one `next` of the business-days schedule plugin costs the scheduler per tick.
//!
//! To compare two builds on a noisy machine, where one process's figures differ from the next
//! by more than most changes: `BENCH_INTERLEAVED=ROUNDS` runs only the plugin comparison, one
//! at a time, in ROUNDS rounds of 250 deliveries each through native, the plugin (as by default
//! and reusing instances), and — when `BENCH_OTHER_WASM=PATH` names another build of
//! webhook-signed — that build, all in one process, and prints each one's p50. `BENCH_INTERLEAVED_CONCURRENCY=64` makes the rounds 64
//! concurrent (2,000 deliveries each) and prints each one's rate. To profile one path alone:
//! `BENCH_PROFILE=native` or `BENCH_PROFILE=plugin` runs only that transport, 64 concurrent.
//! `BENCH_PROFILE=ntfy` runs the `ntfy` example plugin instead — a POST with a few headers and
//! no signature, so the guest does little besides parsing its spec and sending — and
//! `BENCH_PROFILE=ntfy-native` the native transport sending the same request: the sandbox's
//! own cost, without webhook-signed's HMAC-SHA256 (which native does not compute).
//! `BENCH_PROFILE=plugin-reuse` and `ntfy-reuse` run those plugins installed with
//! `calls_per_instance` 128 (an instance makes up to 128 deliveries of one endpoint).
//!
//! Each plugin is measured both ways: installed as by default (a fresh instance for every
//! delivery) and with `calls_per_instance` 128 ("reused" in the rows).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use taskexec::contract::Message;
use taskexec::plugin::{PluginHost, PluginRuntime};
use taskexec::secret::SecretValue;
use taskexec::store::{PluginWrite, Store};
use taskexec::template::{MinijinjaRenderer, RenderContext, Renderer, TemplateKey};
use taskexec::transport::http::HttpTransport;
use taskexec::transport::wasm::WasmTransport;
use taskexec::transport::{normalize_spec, Delivery, EndpointType, EndpointVersion, Transport};

/// Deliveries one instance of a "reused" plugin makes.
const CALLS_PER_INSTANCE: u32 = 128;

struct Bench {
    renderer: MinijinjaRenderer,
    transport: HttpTransport,
    key: TemplateKey,
    spec: Value,
    context: RenderContext,
}

impl Bench {
    /// One delivery as the worker makes it: render the spec, then deliver it.
    async fn deliver_one(&self, i: usize) -> Duration {
        let started = Instant::now();
        let mut context = self.context.clone();
        context.input["user_id"] = json!(format!("u_{i}"));
        let rendered = self.renderer.render(&self.key, &self.spec, &context).await.expect("renders");
        let message = Message {
            execution_id: format!("exec_{i}"),
            attempt: 1,
            idempotency_key: format!("exec_{i}"),
            deadline_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + 30_000,
            spec_json: rendered.to_string(),
        };
        self.transport.deliver(message, &Delivery::default()).await.expect("delivers");
        started.elapsed()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summarize(name: &str, mut latencies: Vec<Duration>, wall: Duration) -> Value {
    latencies.sort();
    let per_sec = latencies.len() as f64 / wall.as_secs_f64();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{name:<28} {:>8} {:>12.0} {:>10.1} {:>10.1} {:>10.1}",
        latencies.len(),
        per_sec,
        us(percentile(&latencies, 0.50)),
        us(percentile(&latencies, 0.99)),
        us(*latencies.last().unwrap())
    );
    json!({
        "scenario": name, "deliveries": latencies.len(), "per_second": per_sec.round(),
        "p50_us": us(percentile(&latencies, 0.50)).round(), "p99_us": us(percentile(&latencies, 0.99)).round(),
        "max_us": us(*latencies.last().unwrap()).round(),
    })
}

/// The service's own allocator (see `src/main.rs`), so the deliveries measured here allocate as
/// the worker's do.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    if interleaved_rounds().is_none() && profiled().is_none() {
        whole_run().await;
    } else {
        // These modes choose their own counts.
        plugin_versus_native(&format!("{}/hook/u", receiver()), 0).await;
    }
}

/// The number in environment variable `name`, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The receiver: a server of its own, as a real receiver is — its own thread and runtime, so
/// the deliveries measured pay the hand-off to another thread that a remote receiver's answer
/// costs, rather than running on the same runtime threads as the receiver. Its base URL; it
/// answers POST /hook/{user}.
fn receiver() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::Builder::new()
        .name("receiver".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new()
                    .route("/hook/{user}", post(|| async { "OK" }))
                    .route("/json/{user}", post(|| async { r#"{"ok": true, "id": "evt_1"}"# }));
                axum::serve(listener, app).await.unwrap()
            })
        })
        .unwrap();
    format!("http://{addr}")
}

async fn whole_run() {
    let n = env_usize("BENCH_N", 20_000);
    let out_path = std::env::var("BENCH_JSON").unwrap_or_else(|_| "bench-results/deliver.json".into());

    let base_url = receiver();

    let spec = normalize_spec(
        EndpointType::Http,
        &json!({
            "url": "{{config.base_url}}/hook/{{input.user_id}}",
            "method": "POST",
            "headers": {"Authorization": "Bearer {{secret.token}}", "X-Source": "bench"},
            "body_template": {"user_id": "{{input.user_id}}", "amount": "{{input.amount}}", "sender": "{{config.sender}}"},
        }),
    )
    .unwrap();
    let bench = Arc::new(Bench {
        renderer: MinijinjaRenderer::new(),
        transport: HttpTransport::new(),
        key: TemplateKey { endpoint: "bench".into(), version: 1 },
        spec,
        context: RenderContext {
            input: json!({"user_id": "u_0", "amount": 12.5}),
            config: json!({"base_url": base_url, "sender": "noreply@example.com"}),
            secrets: BTreeMap::from([("token".to_owned(), SecretValue::new("sk-bench-token".into()))]),
        },
    });

    for i in 0..1000 {
        bench.deliver_one(i).await;
    }
    println!("render + HTTP deliver to 127.0.0.1 ({} deliveries per scenario)", n);
    println!("{:<28} {:>8} {:>12} {:>10} {:>10} {:>10}", "scenario", "n", "per second", "p50 µs", "p99 µs", "max µs");

    let started = Instant::now();
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n {
        latencies.push(bench.deliver_one(i).await);
    }
    let sequential = summarize("1 connection (sequential)", latencies, started.elapsed());

    let concurrency = 64;
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let bench = bench.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(n / concurrency);
                for i in (t..n).step_by(concurrency) {
                    latencies.push(bench.deliver_one(i).await);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(n);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let concurrent = summarize("64 concurrent", latencies, started.elapsed());

    let render_only = {
        let started = Instant::now();
        let mut latencies = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            bench.renderer.render(&bench.key, &bench.spec, &bench.context).await.unwrap();
            latencies.push(t.elapsed());
        }
        summarize("render only", latencies, started.elapsed())
    };

    let plugin_n = env_usize("BENCH_PLUGIN_N", 10_000);
    let comparison = plugin_versus_native(&format!("{base_url}/hook/u"), plugin_n).await;

    let classifier = classifier_overhead(&format!("{base_url}/json/u"), plugin_n).await;
    let schedule = schedule_next_cost(plugin_n).await;

    let report = json!({ "benchmark": "deliver", "results": [sequential, concurrent, render_only],
                         "plugin_versus_native": comparison, "classifier": classifier, "schedule_next": schedule });
    if let Some(dir) = std::path::Path::new(&out_path).parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&out_path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("wrote {out_path}");
}

/// Build plugins/ for wasm32-wasip2 and return the webhook-signed component's bytes.
fn webhook_signed_component() -> Vec<u8> {
    component("webhook_signed")
}

/// Build plugins/ for wasm32-wasip2 (once: cargo finds it built) and return `file`'s bytes.
fn component(file: &str) -> Vec<u8> {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = root.join("plugins/target");
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(root.join("plugins/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the plugins failed");
    std::fs::read(target.join(format!("wasm32-wasip2/release/{file}.wasm"))).unwrap()
}

/// Install transport component `bytes` as plugin `name` with `grants` and default limits.
async fn install(store: &Arc<dyn Store>, name: &str, bytes: Vec<u8>, grants: Value) {
    install_world(store, name, bytes, grants, "transport-plugin", 1).await
}

/// Install transport component `bytes` as plugin `name`, an instance making up to
/// [`CALLS_PER_INSTANCE`] deliveries.
async fn install_reused(store: &Arc<dyn Store>, name: &str, bytes: Vec<u8>, grants: Value) {
    install_world(store, name, bytes, grants, "transport-plugin", CALLS_PER_INSTANCE).await
}

async fn install_world(
    store: &Arc<dyn Store>,
    name: &str,
    bytes: Vec<u8>,
    grants: Value,
    world: &str,
    calls_per_instance: u32,
) {
    let sha256 = <sha2::Sha256 as sha2::Digest>::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let limits = taskexec::plugin::PluginLimits { calls_per_instance, ..Default::default() };
    let limits = serde_json::to_value(limits).unwrap();
    let plugin = PluginWrite { name: name.into(), sha256, bytes, world: world.into(), grants, limits };
    store.plugin_insert(&plugin).await.unwrap();
}

/// The native HTTP delivery to `url` alone, and with its answer kept and judged by the
/// json-status classifier as the worker does (`worker::classify`): deliveries per second and
/// p50, one at a time and 64 concurrent.
async fn classifier_overhead(url: &str, n: usize) -> Value {
    use taskexec::contract::{Answer, Verdict};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(taskexec::store::sqlite::SqliteStore::connect(&dir.path().join("bench.db"), 2).await.unwrap());
    store.migrate().await.unwrap();
    install_world(&store, "json-status", component("json_status"), json!([]), "classifier-plugin", 1).await;
    let host = PluginHost::new(PluginRuntime::new(Some(dir.path().join("cache")), 512).unwrap(), store);
    let native = Arc::new(HttpTransport::new());
    let spec =
        normalize_spec(EndpointType::Http, &json!({"url": url, "method": "POST", "body_template": {"n": 1}})).unwrap();
    let classifier = taskexec::plugin::PluginRef { name: "json-status".into(), version: None };

    let one = move |classify: bool| {
        let (native, spec, host, classifier) = (native.clone(), spec.to_string(), host.clone(), classifier.clone());
        async move {
            let message = Message {
                execution_id: "exec_1".into(),
                attempt: 1,
                idempotency_key: "exec_1".into(),
                deadline_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + 30_000,
                spec_json: spec,
            };
            let t0 = Instant::now();
            if !classify {
                native.deliver(message, &Delivery::default()).await.expect("delivers");
                return t0.elapsed();
            }
            let delivery = Delivery::default().keeping_answer();
            let receipt = native.deliver(message, &delivery).await.expect("delivers");
            let plugin = host.get(&classifier).await.unwrap();
            let answer = delivery.take_answer().unwrap();
            let call = Answer {
                endpoint_type: "HTTP".into(),
                attempt: 1,
                status: answer.status,
                headers: answer.headers,
                body: answer.body,
                outcome: Ok(receipt.output_json),
                config_json: "{}".into(),
            };
            let judged = host.runtime.classify(&plugin.loaded, &plugin.limits, call, Duration::from_millis(500)).await;
            assert_eq!(judged.result, Ok(Verdict::Success));
            t0.elapsed()
        }
    };
    for _ in 0..500 {
        one(true).await;
        one(false).await;
    }
    println!("\nthe same HTTP delivery, native alone and judged by the json-status classifier ({n} per scenario)");
    println!("{:<28} {:>8} {:>12} {:>10} {:>10} {:>10}", "scenario", "n", "per second", "p50 µs", "p99 µs", "max µs");
    let mut rows = Vec::new();
    let mut p50 = std::collections::HashMap::new();
    for concurrency in [1usize, 64] {
        for (name, classify) in [("native", false), ("classified", true)] {
            let started = Instant::now();
            let tasks: Vec<_> = (0..concurrency)
                .map(|_| {
                    let one = one.clone();
                    tokio::spawn(async move {
                        let mut latencies = Vec::with_capacity(n / concurrency);
                        for _ in 0..n / concurrency {
                            latencies.push(one(classify).await);
                        }
                        latencies
                    })
                })
                .collect();
            let mut latencies = Vec::with_capacity(n);
            for task in tasks {
                latencies.extend(task.await.unwrap());
            }
            let wall = started.elapsed();
            latencies.sort();
            p50.insert((name, concurrency), percentile(&latencies, 0.5).as_secs_f64() * 1e6);
            rows.push(summarize(&format!("{name}, {concurrency} concurrent"), latencies, wall));
        }
    }
    for concurrency in [1usize, 64] {
        let overhead = p50[&("classified", concurrency)] - p50[&("native", concurrency)];
        println!("classifier overhead at p50, {concurrency} concurrent: {overhead:.1} µs");
    }
    json!({ "rows": rows, "p50_overhead_us_1": (p50[&("classified", 1)] - p50[&("native", 1)]).round(),
            "p50_overhead_us_64": (p50[&("classified", 64)] - p50[&("native", 64)]).round() })
}

/// `BENCH_PROFILE=native|plugin|plugin-reuse|ntfy|ntfy-reuse|ntfy-native`: only that
/// transport, 64 concurrent
/// (BENCH_PLUGIN_N, default 30,000 deliveries), so a profiler attached to the process sees one
/// path alone.
fn profiled() -> Option<String> {
    let which = std::env::var("BENCH_PROFILE").ok()?;
    assert!(
        ["native", "plugin", "plugin-reuse", "ntfy", "ntfy-reuse", "ntfy-native"].contains(&which.as_str()),
        "BENCH_PROFILE is native, plugin, plugin-reuse, ntfy, ntfy-reuse or ntfy-native"
    );
    Some(which)
}

fn interleaved_rounds() -> Option<usize> {
    std::env::var("BENCH_INTERLEAVED").ok().map(|v| v.parse().expect("BENCH_INTERLEAVED is a number of rounds"))
}

/// Native, the plugin (installed as by default, and reusing instances) and (with
/// BENCH_OTHER_WASM) another build of it, one at a time, in alternating rounds within this one
/// process; each one's p50, p90 and mean.
async fn interleaved(
    store: &Arc<dyn Store>,
    runtime: &Arc<PluginRuntime>,
    plugins: [&Arc<dyn Transport>; 2],
    plugin_spec: &Value,
    native: &Arc<dyn Transport>,
    native_spec: &Value,
    rounds: usize,
) -> Value {
    let mut contenders = vec![
        ("native", native.clone(), native_spec.clone()),
        ("plugin", plugins[0].clone(), plugin_spec.clone()),
        ("reused", plugins[1].clone(), plugin_spec.clone()),
    ];
    if let Ok(path) = std::env::var("BENCH_OTHER_WASM") {
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("BENCH_OTHER_WASM {path}: {e}"));
        install(store, "other", bytes, json!(["http://127.0.0.1:*"])).await;
        let other: Arc<dyn Transport> =
            Arc::new(WasmTransport { host: PluginHost::new(runtime.clone(), store.clone()), plugin: "other".into() });
        contenders.push(("other", other, plugin_spec.clone()));
    }
    let concurrency = env_usize("BENCH_INTERLEAVED_CONCURRENCY", 1);
    let round = if concurrency > 1 { 2_000 } else { 250 };
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    let mut busy = vec![Duration::ZERO; contenders.len()];
    for (_, transport, spec) in &contenders {
        run_deliveries(transport.clone(), spec.clone(), 300, concurrency.min(8)).await;
    }
    for _ in 0..rounds {
        for (i, (_, transport, spec)) in contenders.iter().enumerate() {
            let started = Instant::now();
            latencies[i].extend(run_deliveries(transport.clone(), spec.clone(), round, concurrency).await.1);
            busy[i] += started.elapsed();
        }
    }
    println!("interleaved, {concurrency} at a time: {rounds} rounds of {round} each");
    let mut p50s = serde_json::Map::new();
    for (((name, _, _), mut l), busy) in contenders.iter().zip(latencies).zip(busy) {
        l.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let mean = l.iter().map(|d| us(*d)).sum::<f64>() / l.len() as f64;
        let per_second = l.len() as f64 / busy.as_secs_f64();
        println!(
            "{name:<8} p50 {:>7.1} µs  p90 {:>7.1} µs  mean {mean:>7.1} µs  {per_second:>8.0}/s",
            us(percentile(&l, 0.5)),
            us(percentile(&l, 0.9))
        );
        p50s.insert(
            name.to_string(),
            json!({"p50_us": us(percentile(&l, 0.5)).round(), "per_second": per_second.round()}),
        );
    }
    Value::Object(p50s)
}

/// Run `n` deliveries, `concurrency` at a time, through `transport`; (per second, sorted latencies).
async fn run_deliveries(
    transport: Arc<dyn Transport>,
    spec: Value,
    n: usize,
    concurrency: usize,
) -> (f64, Vec<Duration>) {
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|t| {
            let (transport, spec) = (transport.clone(), spec.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(n / concurrency + 1);
                for i in (t..n).step_by(concurrency) {
                    let message = Message {
                        execution_id: format!("exec_{i}"),
                        attempt: 1,
                        idempotency_key: format!("exec_{i}"),
                        deadline_ms: u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap() + 30_000,
                        spec_json: spec.to_string(),
                    };
                    let t0 = Instant::now();
                    // As the worker delivers: for one endpoint version (what reused instances
                    // are scoped to).
                    let delivery =
                        Delivery::default().for_endpoint(EndpointVersion { name: "bench".into(), version: 1 });
                    transport.deliver(message, &delivery).await.expect("delivers");
                    latencies.push(t0.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(n);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let per_second = n as f64 / started.elapsed().as_secs_f64();
    latencies.sort();
    (per_second, latencies)
}

/// The same signed-looking POST through the plugin and through the native transport.
async fn plugin_versus_native(url: &str, n: usize) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(taskexec::store::sqlite::SqliteStore::connect(&dir.path().join("bench.db"), 2).await.unwrap());
    store.migrate().await.unwrap();
    install(&store, "webhook", webhook_signed_component(), json!(["http://127.0.0.1:*"])).await;
    install_reused(&store, "webhook-reused", webhook_signed_component(), json!(["http://127.0.0.1:*"])).await;
    let hostile = std::fs::read(
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../plugins/target/wasm32-wasip2/release/hostile.wasm"),
    )
    .unwrap();
    install(&store, "noop", hostile, json!([])).await;
    let runtime = PluginRuntime::new(Some(dir.path().join("cache")), 512).unwrap();
    let host_for_breakdown = PluginHost::new(runtime.clone(), store.clone());
    let noop: Arc<dyn Transport> = Arc::new(WasmTransport { host: host_for_breakdown.clone(), plugin: "noop".into() });
    let plugin: Arc<dyn Transport> =
        Arc::new(WasmTransport { host: PluginHost::new(runtime.clone(), store.clone()), plugin: "webhook".into() });
    let plugin_reused: Arc<dyn Transport> = Arc::new(WasmTransport {
        host: PluginHost::new(runtime.clone(), store.clone()),
        plugin: "webhook-reused".into(),
    });
    let native: Arc<dyn Transport> = Arc::new(HttpTransport::new());
    let body = json!({"user_id": "u_1", "amount": 12.5, "sender": "noreply@example.com"});
    let plugin_spec = json!({"url": url, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "body_template": body, "timeout_ms": 10000});
    let native_spec = normalize_spec(EndpointType::Http, &json!({"url": url, "method": "POST", "body_template": body,
        "headers": {"webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "webhook-timestamp": "1614265330"}})).unwrap();
    if let Some(rounds) = interleaved_rounds() {
        let plugins = [&plugin, &plugin_reused];
        return interleaved(&store, &runtime, plugins, &plugin_spec, &native, &native_spec, rounds).await;
    }
    // The `ntfy` example plugin and the native transport sending the same request: the
    // sandbox's own cost, without webhook-signed's HMAC (which native does not compute).
    install(&store, "ntfy", component("ntfy"), json!(["http://127.0.0.1:*"])).await;
    install_reused(&store, "ntfy-reused", component("ntfy"), json!(["http://127.0.0.1:*"])).await;
    let ntfy: Arc<dyn Transport> =
        Arc::new(WasmTransport { host: PluginHost::new(runtime.clone(), store.clone()), plugin: "ntfy".into() });
    let ntfy_reused: Arc<dyn Transport> =
        Arc::new(WasmTransport { host: PluginHost::new(runtime.clone(), store.clone()), plugin: "ntfy-reused".into() });
    let server = url.rsplit_once('/').expect("the receiver's URL has a path").0;
    let message = body.to_string();
    let ntfy_spec = json!({"server": server, "topic": "u", "message": message, "title": "Payment"});
    let ntfy_native_spec = normalize_spec(
        EndpointType::Http,
        &json!({"url": url, "method": "POST", "body_template": message,
        "headers": {"x-message-id": "exec_1", "title": "Payment"}}),
    )
    .unwrap();
    if let Some(which) = profiled() {
        let (transport, spec) = match which.as_str() {
            "plugin" => (&plugin, &plugin_spec),
            "plugin-reuse" => (&plugin_reused, &plugin_spec),
            "ntfy" => (&ntfy, &ntfy_spec),
            "ntfy-reuse" => (&ntfy_reused, &ntfy_spec),
            "ntfy-native" => (&native, &ntfy_native_spec),
            _ => (&native, &native_spec),
        };
        run_deliveries(transport.clone(), spec.clone(), 1000, 8).await;
        let n = env_usize("BENCH_PLUGIN_N", 30_000);
        let (per_second, _) = run_deliveries(transport.clone(), spec.clone(), n, 64).await;
        println!("{which}, 64 concurrent: {n} deliveries, {per_second:.0}/s");
        return json!({ which: per_second });
    }
    // Warm both: connection pools, the compiled component, the instance pool.
    run_deliveries(plugin.clone(), plugin_spec.clone(), 500, 8).await;
    run_deliveries(plugin_reused.clone(), plugin_spec.clone(), 500, 8).await;
    run_deliveries(native.clone(), native_spec.clone(), 500, 8).await;

    println!("\nthe same HTTP delivery: webhook-signed plugin versus native ({n} per scenario)");
    println!("{:<28} {:>8} {:>12} {:>10} {:>10} {:>10}", "scenario", "n", "per second", "p50 µs", "p99 µs", "max µs");
    let mut rows = Vec::new();
    let mut p50 = std::collections::HashMap::new();
    let mut rates = std::collections::HashMap::new();
    for concurrency in [1usize, 64] {
        let contenders = [
            ("native", &native, &native_spec),
            ("plugin", &plugin, &plugin_spec),
            ("reused", &plugin_reused, &plugin_spec),
        ];
        for (name, transport, spec) in contenders {
            let (per_second, latencies) = run_deliveries(transport.clone(), spec.clone(), n, concurrency).await;
            let label = format!("{name}, {concurrency} concurrent");
            let row = summarize(&label, latencies.clone(), Duration::from_secs_f64(n as f64 / per_second));
            p50.insert((name, concurrency), percentile(&latencies, 0.5).as_secs_f64() * 1e6);
            rates.insert((name, concurrency), per_second);
            rows.push(row);
        }
    }
    // At 64 concurrent also the ntfy pair (after a warm-up of its own).
    run_deliveries(ntfy.clone(), ntfy_spec.clone(), 500, 8).await;
    run_deliveries(ntfy_reused.clone(), ntfy_spec.clone(), 500, 8).await;
    let contenders = [
        ("ntfy-native", &native, &ntfy_native_spec),
        ("ntfy", &ntfy, &ntfy_spec),
        ("ntfy-reused", &ntfy_reused, &ntfy_spec),
    ];
    for (name, transport, spec) in contenders {
        let (per_second, latencies) = run_deliveries(transport.clone(), spec.clone(), n, 64).await;
        rows.push(summarize(
            &format!("{name}, 64 concurrent"),
            latencies,
            Duration::from_secs_f64(n as f64 / per_second),
        ));
        rates.insert((name, 64), per_second);
    }
    for concurrency in [1usize, 64] {
        let overhead = p50[&("plugin", concurrency)] - p50[&("native", concurrency)];
        let reused = p50[&("reused", concurrency)] - p50[&("native", concurrency)];
        println!("plugin overhead at p50, {concurrency} concurrent: {overhead:.1} µs ({reused:.1} µs reused)");
    }
    let share = |plugin: &str, native: &str| rates[&(plugin, 64)] / rates[&(native, 64)];
    let webhook_share = share("plugin", "native");
    let ntfy_share = share("ntfy", "ntfy-native");
    let (webhook_reused_share, ntfy_reused_share) = (share("reused", "native"), share("ntfy-reused", "ntfy-native"));
    println!(
        "plugin's share of native at 64 concurrent: webhook-signed {:.1}% ({:.1}% reused), ntfy (the same request) {:.1}% ({:.1}% reused)",
        webhook_share * 100.0,
        webhook_reused_share * 100.0,
        ntfy_share * 100.0,
        ntfy_reused_share * 100.0
    );

    // Where a plugin delivery's time goes, one at a time: the registry lookup, then
    // instantiate + call of a plugin that does no I/O (hostile, mode "ok").
    let lookups = {
        let mut latencies = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let t = Instant::now();
            host_for_breakdown.latest("webhook").await.unwrap();
            latencies.push(t.elapsed());
        }
        latencies.sort();
        percentile(&latencies, 0.5).as_secs_f64() * 1e6
    };
    let (_, empty_calls) = run_deliveries(noop.clone(), json!({"mode": "ok"}), 5000, 1).await;
    let empty_call = percentile(&empty_calls, 0.5).as_secs_f64() * 1e6;
    println!(
        "breakdown at p50: registry lookup {lookups:.1} µs; lookup + instantiate + call with no I/O {empty_call:.1} µs"
    );
    json!({ "rows": rows, "p50_overhead_us_1": (p50[&("plugin", 1)] - p50[&("native", 1)]).round(),
            "p50_overhead_us_64": (p50[&("plugin", 64)] - p50[&("native", 64)]).round(),
            "reused_p50_overhead_us_1": (p50[&("reused", 1)] - p50[&("native", 1)]).round(),
            "share_of_native_64": {"webhook_signed": webhook_share, "ntfy": ntfy_share,
                                    "webhook_signed_reused": webhook_reused_share, "ntfy_reused": ntfy_reused_share} })
}

/// One `next` of the business-days schedule plugin (as the scheduler asks it for each tick of a
/// plugin-scheduled cron job): p50 and p99 of `n` calls, one at a time.
async fn schedule_next_cost(n: usize) -> Value {
    use taskexec::contract::LocalTime;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(taskexec::store::sqlite::SqliteStore::connect(&dir.path().join("bench.db"), 2).await.unwrap());
    store.migrate().await.unwrap();
    install_world(&store, "workdays", component("business_days"), json!([]), "schedule-plugin", 1).await;
    let host = PluginHost::new(PluginRuntime::new(Some(dir.path().join("cache")), 512).unwrap(), store);
    let plugin = host.latest("workdays").await.unwrap();
    let spec = json!({"times": ["09:30", "16:00"], "holidays": ["2026-12-25", "2027-01-01"]}).to_string();
    let after = LocalTime { year: 2026, month: 12, day: 24, hour: 10, minute: 0, second: 0, weekday: 4 };
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n + 500 {
        let t0 = Instant::now();
        let next =
            host.runtime.schedule_next(&plugin.loaded, &plugin.limits, &spec, after, Duration::from_millis(500)).await;
        assert!(matches!(next, Ok(Some(_))), "{next:?}");
        if i >= 500 {
            latencies.push(t0.elapsed());
        }
    }
    let started = Instant::now();
    let wall = started.elapsed() + latencies.iter().sum::<Duration>();
    println!("\none `next` of the business-days schedule plugin ({n} calls)");
    summarize("schedule next, 1 at a time", latencies, wall)
}
