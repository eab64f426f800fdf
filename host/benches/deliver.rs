//! Render + HTTP deliver, end to end through the built-in renderer and transport, to a local
//! receiver that answers 200 at once. Prints deliveries per second and p50/p99/max latency,
//! one connection at a time and 64 concurrent, and writes the figures as JSON.
//!
//!     cargo bench -p taskexec --bench deliver
//!
//! Environment: BENCH_N (deliveries per scenario, default 20000), BENCH_JSON (output path,
//! default bench-results/deliver.json).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use taskexec::contract::Message;
use taskexec::secret::SecretValue;
use taskexec::template::{MinijinjaRenderer, RenderContext, Renderer, TemplateKey};
use taskexec::transport::http::HttpTransport;
use taskexec::transport::{normalize_spec, DeliveryLog, EndpointType, Transport};

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
        self.transport.deliver(message, &DeliveryLog::default()).await.expect("delivers");
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

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let out_path = std::env::var("BENCH_JSON").unwrap_or_else(|_| "bench-results/deliver.json".into());

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/hook/{user}", post(|| async { "OK" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

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
            config: json!({"base_url": format!("http://{addr}"), "sender": "noreply@example.com"}),
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

    let report = json!({ "benchmark": "deliver", "results": [sequential, concurrent, render_only] });
    if let Some(dir) = std::path::Path::new(&out_path).parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&out_path, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    println!("wrote {out_path}");
}
