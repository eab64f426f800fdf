//! Traces: one trace from the request that creates a job to every delivery it causes.
//!
//! Every process installs an OpenTelemetry layer under `tracing`, so spans have W3C ids
//! whether or not anything is exported:
//!
//! - the API's `request` span continues the caller's `traceparent` header when it has one;
//! - a job stores the [`TraceParent`] of the request that created it (its trace id and the
//!   request span's id), and each of its executions a copy;
//! - the worker's `attempt` span is a child of that stored context, and each delivery carries
//!   the attempt's own `traceparent` to the receiver: an HTTP header, a Kafka header, a Redis
//!   Stream field. A receiver that traces joins the same trace.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, spans are
//! sampled (the caller's sampling decision wins when it sent one) and exported over OTLP/HTTP
//! in protobuf, batched (`OTEL_BSP_*` tune the batches); `OTEL_SERVICE_NAME` names the service
//! (default `taskexec`). Without it nothing is sampled and nothing leaves the process: ids are
//! still made, so receivers still get a `traceparent`.

use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header (HTTP, Kafka) or field (Redis Streams) a delivery's trace context travels in.
pub const TRACEPARENT: &str = "traceparent";

const ENDPOINT_VARIABLES: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// A W3C trace context (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`), checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent(String);

impl TraceParent {
    /// The value if it is a well-formed version-00 `traceparent` with non-zero ids.
    pub fn parse(value: &str) -> Option<Self> {
        let parts: Vec<&str> = value.split('-').collect();
        let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        match parts.as_slice() {
            [version, trace, parent, flags]
                if *version == "00"
                    && hex(trace, 32)
                    && hex(parent, 16)
                    && hex(flags, 2)
                    && !zero(trace)
                    && !zero(parent) =>
            {
                Some(Self(value.to_owned()))
            }
            _ => None,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32 hex digits shared by every span of the trace.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The 16 hex digits of the span this context names as parent.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// The 2 hex digits of the trace flags.
    fn flags(&self) -> &str {
        &self.0[53..55]
    }

    /// The context of `span` (None when no OpenTelemetry layer is installed, as in unit tests).
    /// Written as `TraceContextPropagator::inject_context` writes it (version 00, only the
    /// sampled flag), without its header map: the worker asks this once per attempt.
    pub fn of(span: &tracing::Span) -> Option<Self> {
        let context = span.context();
        let span = context.span();
        let ids = span.span_context();
        ids.is_valid().then(|| {
            let flags = ids.trace_flags() & TraceFlags::SAMPLED;
            Self(format!("00-{}-{}-{flags:02x}", ids.trace_id(), ids.span_id()))
        })
    }

    /// The context of the span the caller is in.
    pub fn current() -> Option<Self> {
        Self::of(&tracing::Span::current())
    }

    /// Make `span` a child of this context. Call before the span is entered. As
    /// `TraceContextPropagator::extract` would make it, without a header map: a remote
    /// parent with only the sampled flag kept.
    pub fn adopt(&self, span: &tracing::Span) {
        // `parse` checked the ids are hex of the right length, and not zero.
        let (Ok(trace_id), Ok(span_id), Ok(flags)) = (
            TraceId::from_hex(self.trace_id()),
            SpanId::from_hex(self.parent_id()),
            u8::from_str_radix(self.flags(), 16),
        ) else {
            return;
        };
        let flags = TraceFlags::new(flags) & TraceFlags::SAMPLED;
        let remote = SpanContext::new(trace_id, span_id, flags, true, TraceState::default());
        // Only fails when no layer is installed or the span is already started: either way
        // the span keeps its own root, which loses the link and nothing else.
        let _ = span.set_parent(opentelemetry::Context::current().with_remote_span_context(remote));
    }
}

impl std::fmt::Display for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The tracer the `tracing` layer reports to, and the exporter behind it when one is set.
pub struct Tracing {
    provider: SdkTracerProvider,
    pub exporting_to: Option<String>,
}

impl Tracing {
    /// From the OTEL_* environment: exporting when an OTLP endpoint is named. Must be called
    /// inside the Tokio runtime (the exporter's requests run on it).
    pub fn from_env() -> anyhow::Result<Self> {
        let endpoint =
            ENDPOINT_VARIABLES.iter().find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()));
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("taskexec");
        }
        let builder = SdkTracerProvider::builder().with_resource(resource.build());
        let provider = match &endpoint {
            None => builder.with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff))).build(),
            Some(_) => {
                use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_http_client(OtlpClient::new()?)
                    .build()?;
                builder
                    .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)))
                    .with_batch_exporter(exporter)
                    .build()
            }
        };
        Ok(Self { provider, exporting_to: endpoint })
    }

    /// The `tracing` layer that gives spans their trace ids and hands them to the exporter.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("taskexec")).with_tracked_inactivity(false)
    }

    /// Export what is still batched, for at most a few seconds. Called once, at exit.
    pub async fn shutdown(self) {
        // The batch processor's own thread waits on requests that run on the runtime: wait
        // for it off the runtime's threads.
        let provider = self.provider;
        let _ = tokio::time::timeout(Duration::from_secs(5), tokio::task::spawn_blocking(move || provider.shutdown()))
            .await;
    }
}

/// The exporter's HTTP client: the service's own reqwest (rustls, so `https://` collectors
/// work), its requests run on the Tokio runtime. The batch processor calls it from its own
/// thread, which has no runtime, so each request is spawned onto the one captured here.
#[derive(Debug)]
struct OtlpClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OtlpClient {
    fn new() -> anyhow::Result<Self> {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
        Ok(Self { client, runtime: tokio::runtime::Handle::try_current()? })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<opentelemetry_http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let response = client.execute(reqwest::Request::try_from(request)?).await?;
            let mut answer = opentelemetry_http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, opentelemetry_http::HttpError>(answer.body(body)?)
        });
        sent.await?
    }
}

#[cfg(test)]
mod tests {
    use super::TraceParent;

    #[test]
    fn only_well_formed_trace_contexts_are_kept() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceParent::parse(good).unwrap();
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.parent_id(), "00f067aa0ba902b7");
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?} accepted");
        }
    }
}
