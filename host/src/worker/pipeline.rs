//! One attempt of one execution: resolve → render → dispatch → record and finalize.
//!
//! 1. Resolve: the endpoint, its config and the secrets its templates name, through caches
//!    (`TE_CONFIG_CACHE_TTL_SEC`, `TE_SECRET_CACHE_TTL_SEC`). Values are taken when the attempt
//!    starts: a config changed mid-attempt applies from the next one.
//! 2. Render the endpoint's spec (compiled once per endpoint version). A template that cannot
//!    resolve fails the execution at once: a retry would fail the same way.
//! 3. Dispatch through the endpoint type's [`Transport`](crate::transport::Transport); when the
//!    endpoint has a classifier, it judges the receiver's answer (`classify`).
//! 4. Record the attempt, its log lines, and the execution's new state in one transaction,
//!    fenced by the attempt number (see [`crate::store::Claims::execution_finish_many`]).
//!
//! Secret values used by the attempt are scrubbed from everything stored — outputs, errors,
//! log lines — in every form a receiver may echo them (`secret::redact`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tracing::Instrument;

use super::cache::TtlCache;
use super::classify::{self, Judgement};
use super::completer::Completer;
use super::lease::{Held, Leases, LEASE_MARGIN};
use super::outcome::{classified, Logs, Outcome, ReceiverSign};
use super::Slot;
use crate::contract::{Failure, FailureKind, Message, Verdict};
use crate::domain::{AttemptErrorType, ExecutionStatus, Scope};
use crate::retry::RetryPolicy;
use crate::secret::hosts::{self, AllowedHosts};
use crate::secret::{SecretCipher, SecretValue};
use crate::store::{now, Endpoint, Execution, Store, StoreError};
use crate::template::{self, RenderContext, Renderers, TemplateKey};
use crate::trace::TraceParent;
use crate::transport::{Delivery, EndpointVersion, Transports};

/// A decrypted secret as the worker caches it: its value and where it may be sent.
#[derive(Clone)]
struct OpenedSecret {
    value: SecretValue,
    allowed_hosts: Option<AllowedHosts>,
}

/// The secrets of one attempt that name the hosts they may go to.
type Restrictions = Vec<(String, AllowedHosts)>;

/// The longest a receiver's `Retry-After` pauses its endpoint.
const MAX_ENDPOINT_PAUSE: Duration = Duration::from_secs(3600);

/// Time a transport gets beyond its own timeout before the host stops waiting.
const DEADLINE_GRACE: Duration = Duration::from_secs(2);

pub struct Pipeline {
    store: Arc<dyn Store>,
    cipher: Arc<SecretCipher>,
    transports: Transports,
    renderers: Renderers,
    worker_id: String,
    /// By (name, version): a version never changes, so only executions older than endpoint
    /// versioning (no version: the newest) see an update when the entry expires. Shared, not
    /// cloned, by each attempt (a clone and its drop were 2.4% of the worker's CPU in a drain).
    endpoints: TtlCache<(String, Option<i32>), Arc<Resolved>>,
    configs: TtlCache<String, Value>,
    secrets: TtlCache<String, OpenedSecret>,
    completer: Completer,
    /// The secret names each endpoint version's templates read: found once per version, not
    /// by re-parsing the spec on every attempt.
    secret_refs: std::sync::RwLock<std::collections::HashMap<TemplateKey, Arc<Vec<String>>>>,
}

/// An endpoint version as attempts use it: the endpoint, and its retry policy parsed once.
struct Resolved {
    endpoint: Endpoint,
    policy: RetryPolicy,
}

/// How long the pipeline's caches keep what they read.
#[derive(Debug, Clone, Copy)]
pub struct CacheTtls {
    /// Endpoints and configs (`TE_CONFIG_CACHE_TTL_SEC`).
    pub config: Duration,
    /// Decrypted secrets (`TE_SECRET_CACHE_TTL_SEC`).
    pub secret: Duration,
}

impl Pipeline {
    pub fn new(
        store: Arc<dyn Store>,
        cipher: Arc<SecretCipher>,
        transports: Transports,
        renderers: Renderers,
        worker_id: String,
        ttls: CacheTtls,
    ) -> Self {
        Self {
            store: store.clone(),
            cipher,
            transports,
            renderers,
            worker_id,
            // Endpoints change rarely and carry their version; they share the config TTL.
            endpoints: TtlCache::new(ttls.config),
            configs: TtlCache::new(ttls.config),
            secrets: TtlCache::new(ttls.secret),
            completer: Completer::spawn(store),
            secret_refs: Default::default(),
        }
    }

    /// Wait until every recorded outcome is written, for at most `within`. Called once no
    /// attempt is in flight.
    pub async fn close(self, within: Duration) {
        self.completer.close(within).await;
    }

    /// One attempt, ready to spawn: it runs in its own span (a child of the job's trace context,
    /// with the ids a reader of the logs or the trace needs); `held` keeps the lease renewed until
    /// the outcome is written (or given up), and `slot` is freed when the delivery is over and
    /// its outcome queued for writing.
    ///
    /// Not an `async fn`, and `run` owns what it uses: the future is held for as long as the
    /// receiver takes to answer, and each `async fn` between the spawn and the delivery kept
    /// its own copy of the execution beside the one the next held.
    pub fn process(
        self: Arc<Self>,
        execution: Execution,
        leases: Arc<Leases>,
        held: Held,
        slot: Slot,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        // A root span, as it was when made on the spawned task: its parent is the job's context.
        let span = tracing::info_span!(
            parent: None,
            "attempt",
            job_id = %execution.job_id,
            execution_id = %execution.execution_id,
            attempt = execution.attempt_count,
            tenant = crate::domain::tenant::tenant_of(&execution.endpoint),
            endpoint = %execution.endpoint,
        );
        if let Some(parent) = execution.trace_parent.as_deref().and_then(TraceParent::parse) {
            parent.adopt(&span);
        }
        let traceparent = TraceParent::of(&span);
        self.run(execution, leases, held, slot, traceparent).instrument(span)
    }

    async fn run(
        self: Arc<Self>,
        mut execution: Execution,
        leases: Arc<Leases>,
        held: Held,
        mut slot: Slot,
        traceparent: Option<TraceParent>,
    ) {
        // Claimed ahead of its time (`store::READY_AHEAD`): it starts at its time, on this
        // process's timer (and runtime: `super::on_time`), which the claim recorded as its start.
        if let Ok(early) = (execution.run_at - now()).to_std() {
            tokio::time::sleep(early).await;
        }
        let started_at = now();
        let clock = Instant::now();
        let attempt = execution.attempt_count;
        let mut logs = Logs(Vec::new());
        logs.push("INFO", format!("Attempt {attempt} of {} started on {}.", execution.max_attempts, self.worker_id));

        // An abort drops the attempt where it is: an HTTP delivery's connection is closed.
        let attempted = tokio::select! {
            biased;
            () = held.aborted().cancelled() => None,
            done = self.attempt(&mut execution, &leases, &mut logs, traceparent) => Some(done),
        };
        let (outcome, policy, secrets) = match attempted {
            Some(Ok(done)) => done,
            Some(Err(error)) => (Outcome::store_failed(&error, &mut logs), RetryPolicy::default(), Vec::new()),
            None => (Outcome::aborted(&mut logs), RetryPolicy::default(), Vec::new()),
        };
        let completed_at = now();
        let duration_ms = i32::try_from(clock.elapsed().as_millis()).unwrap_or(i32::MAX);
        let mut finish = super::outcome::attempt_finish(
            &execution,
            outcome,
            &policy,
            &secrets,
            started_at,
            completed_at,
            duration_ms,
            logs,
        );
        if finish.execution_status == ExecutionStatus::Retrying
            && execution.concurrency_key.is_some()
            && !self.retry_holds_key(&execution).await
        {
            // It waits for its retry's time, and then for its key, with the others.
            finish.execution_status = ExecutionStatus::Pending;
        }
        let status = finish.execution_status;
        let error_type = finish.error.as_ref().and_then(|e| e["type"].as_str()).unwrap_or("").to_owned();
        let written = self.completer.submit(finish).await;
        slot.free();
        match written.await {
            Ok(true) => {
                super::outcome::record_metrics(&execution, status, &error_type);
                tracing::debug!(%status, duration_ms, "Attempt recorded.")
            }
            Ok(false) => {
                tracing::warn!("Attempt result discarded: the execution was reclaimed or cancelled meanwhile.")
            }
            Err(error) => {
                tracing::error!(%error, "Could not record the attempt.")
            }
        }
        // The lease is renewed until the outcome is written (or given up).
        drop(held);
    }

    /// The endpoint version an execution is delivered with, and its retry policy (cached).
    async fn resolve(&self, execution: &Execution) -> Result<Option<Arc<Resolved>>, StoreError> {
        let (name, version) = (&execution.endpoint, execution.endpoint_version);
        self.endpoints
            .get_or_load(&(name.clone(), version), || async {
                let endpoint = self.store.endpoint_for_job(name, version).await?;
                Ok::<_, StoreError>(endpoint.map(|endpoint| {
                    let policy = RetryPolicy::parse(Some(&endpoint.retry_policy)).unwrap_or_default();
                    Arc::new(Resolved { endpoint, policy })
                }))
            })
            .await
    }

    /// Whether an execution with a concurrency key that will retry keeps its key's place
    /// meanwhile: under `ordering: fifo` (the ones behind it wait), not otherwise
    /// (`flow::concurrency`).
    async fn retry_holds_key(&self, execution: &Execution) -> bool {
        // Unknown (the endpoint gone, or unread): held, the order kept.
        self.resolve(execution).await.ok().flatten().is_none_or(|r| {
            r.endpoint.concurrency.as_ref().is_none_or(|c| c.ordering == crate::flow::concurrency::KeyOrdering::Fifo)
        })
    }

    /// Resolve, render and deliver. Store failures are errors; everything else is an outcome.
    /// The execution's input is taken for the render context (see `context`).
    async fn attempt(
        &self,
        execution: &mut Execution,
        leases: &Leases,
        logs: &mut Logs,
        traceparent: Option<TraceParent>,
    ) -> Result<(Outcome, RetryPolicy, Vec<SecretValue>), StoreError> {
        // The steps before and after the delivery are boxed: a future is as large as the
        // largest of its steps, and this one is held for as long as the receiver takes to
        // answer (see `run`).
        let resolved = Box::pin(self.resolve(execution)).await?;
        let Some(resolved) = resolved else {
            let message = format!("Endpoint '{}' no longer exists.", execution.endpoint);
            logs.push("ERROR", message.clone());
            return Ok((
                Outcome::permanent(AttemptErrorType::EndpointNotFound, message),
                RetryPolicy::default(),
                Vec::new(),
            ));
        };
        let (endpoint, policy) = (&resolved.endpoint, resolved.policy.clone());
        let endpoint_type = endpoint.endpoint_type;
        if let Some(message) = policy.expired(execution.due_at(), now()).or_else(|| execution.expired_unstarted(now()))
        {
            logs.push("ERROR", message.clone());
            return Ok((Outcome::permanent(AttemptErrorType::DeadlineExceeded, message), policy, Vec::new()));
        }

        let (context, restrictions) = match Box::pin(self.context(execution.input.take(), endpoint)).await? {
            Ok(found) => found,
            Err(message) => {
                logs.push("ERROR", message.clone());
                return Ok((
                    Outcome::permanent(AttemptErrorType::TemplateResolutionFailed, message),
                    policy,
                    Vec::new(),
                ));
            }
        };
        let secrets: Vec<SecretValue> = context.secrets.values().cloned().collect();
        let key = TemplateKey { endpoint: endpoint.name.clone(), version: endpoint.version };
        let renderer = self.renderers.for_endpoint(endpoint.renderer.as_deref());
        let rendered = renderer.render(&key, &endpoint.spec, &context).await;
        // What an attempt holds while its delivery waits is memory per delivery in flight:
        // the context (input, config, secrets as JSON maps) and, below, the rendered spec are
        // let go before the wait (~5 KiB of live heap each attempt; docs/benchmarks.md).
        drop(context);
        let rendered = match rendered {
            Ok(rendered) => rendered,
            Err(error) => {
                let message = format!("Template resolution failed: {}", error.message);
                logs.push("ERROR", message.clone());
                let kind = if error.message.contains(crate::template::bounded::TOO_LARGE) {
                    AttemptErrorType::TemplateTooLarge
                } else {
                    AttemptErrorType::TemplateResolutionFailed
                };
                let mut outcome = Outcome::permanent(kind, message);
                if let (Outcome::Failed { error: e, .. }, Some(variable)) = (&mut outcome, error.variable) {
                    e["variable"] = json!(variable);
                }
                return Ok((outcome, policy, secrets));
            }
        };
        // Said on the attempt's first line rather than a line of its own: every line is a row
        // written per attempt, and a third of a delivery's rows went to this one.
        logs.append_to_first(&format!(
            " Rendered the {} spec of endpoint version {}.",
            endpoint.endpoint_type, endpoint.version
        ));

        let transport = match self.transports.for_endpoint(endpoint_type, endpoint.plugin_ref().as_ref()) {
            Ok(transport) => transport,
            Err(error) => {
                let message = format!("`{}`: {}", error.field, error.message);
                logs.push("ERROR", message.clone());
                return Ok((Outcome::permanent(AttemptErrorType::InvalidSpec, message), policy, secrets));
            }
        };
        // A secret that names where it may go leaves for nowhere else: checked on the rendered
        // spec, before anything is sent.
        if !restrictions.is_empty() {
            let destinations = transport.destinations(&rendered).await;
            if let Some(message) =
                restrictions.iter().find_map(|(name, allowed)| hosts::refusal(name, allowed, &destinations))
            {
                logs.push("ERROR", message.clone());
                return Ok((Outcome::permanent(AttemptErrorType::SecretHostNotAllowed, message), policy, secrets));
            }
        }

        // Every endpoint type's timeout is bounded: the endpoint's own, else its spec's.
        let timeout_ms = crate::transport::delivery_timeout_ms(endpoint, &rendered);
        let deadline = now() + chrono::Duration::milliseconds(i64::try_from(timeout_ms).unwrap_or(i64::MAX / 2));
        let message = Message {
            execution_id: execution.execution_id.to_string(),
            attempt: u32::try_from(execution.attempt_count).unwrap_or(0),
            idempotency_key: execution.execution_id.to_string(),
            deadline_ms: u64::try_from(deadline.timestamp_millis()).unwrap_or(0),
            // Written straight into a buffer: `Value`'s Display goes through the formatter a
            // write at a time.
            spec_json: serde_json::to_string(&rendered).expect("a JSON value serializes"),
        };
        drop(rendered);
        // The lease must outlast this attempt's deadline, or a live attempt could be
        // reclaimed and delivered twice: extend it first when the deadline is far.
        let needed = Duration::from_millis(timeout_ms) + DEADLINE_GRACE + LEASE_MARGIN;
        if !Box::pin(leases.ensure(&execution.execution_id, execution.attempt_count, needed)).await? {
            let message = "The execution was reclaimed or cancelled before delivery; nothing was sent.".to_owned();
            logs.push("WARN", message.clone());
            return Ok((Outcome::permanent(AttemptErrorType::LeaseLost, message), policy, secrets));
        }
        let sent = Instant::now();
        crate::metrics::fire_lateness((now() - execution.run_at).to_std().unwrap_or_default());
        let classifier = endpoint.classifier_ref();
        let mut delivery = Delivery::traced(traceparent)
            .for_endpoint(EndpointVersion { name: endpoint.name.clone(), version: endpoint.version });
        // The answer is kept for a classifier, and for a success callback (its headers).
        if classifier.is_some() || execution.on_success.is_some() {
            delivery = delivery.keeping_answer();
        }
        let delivered = tokio::time::timeout(
            Duration::from_millis(timeout_ms) + DEADLINE_GRACE,
            transport.deliver(message, &delivery),
        )
        .await
        .unwrap_or_else(|_| Err(Failure::timeout(format!("the transport did not return within {timeout_ms} ms"))));
        crate::metrics::delivery(endpoint_type.as_str(), sent.elapsed());
        let elapsed_ms = sent.elapsed().as_millis();
        let headers = execution.on_success.as_ref().and_then(|_| delivery.answer_headers());
        let judgement = match &classifier {
            None => None,
            Some(classifier) => {
                let config = endpoint.classifier_config.as_ref();
                let attempt = u32::try_from(execution.attempt_count).unwrap_or(0);
                let plugins = self.transports.plugins();
                Box::pin(classify::judge(plugins, classifier, config, endpoint_type, attempt, &delivered, &delivery))
                    .await
            }
        };
        for (level, line) in delivery.take() {
            logs.push(level, line);
        }
        if let Err(failure) = &delivered {
            if let (FailureKind::Rejected(Some(429)), Some(wait_ms)) = (&failure.kind, failure.retry_after_ms) {
                Box::pin(self.pause_endpoint(&endpoint.name, wait_ms, logs)).await;
            }
        }
        let mut outcome = match (judgement, delivered) {
            (None | Some(Judgement { verdict: Verdict::Keep, .. }), Err(failure)) => {
                self.failed(transport.error_json(&failure), &failure, elapsed_ms, logs)
            }
            (None | Some(Judgement { verdict: Verdict::Keep | Verdict::Success, .. }), Ok(receipt)) => {
                let output: Value = serde_json::from_str(&receipt.output_json)
                    .unwrap_or_else(|_| json!({ "raw": receipt.output_json }));
                logs.say_last(format!("Delivered in {elapsed_ms} ms."));
                Outcome::Delivered { output }
            }
            (Some(judgement), _) => classified(judgement, elapsed_ms, logs),
        };
        if let (Outcome::Delivered { output: Value::Object(output) }, Some(headers)) = (&mut outcome, headers) {
            output.insert("headers".to_owned(), headers);
        }
        Ok((outcome, policy, secrets))
    }

    /// A receiver's `429 Too Many Requests` with `Retry-After` speaks for the whole endpoint:
    /// no execution of it is claimed, by any worker, until then (at most [`MAX_ENDPOINT_PAUSE`]).
    async fn pause_endpoint(&self, endpoint: &str, wait_ms: u64, logs: &mut Logs) {
        let wait = Duration::from_millis(wait_ms).min(MAX_ENDPOINT_PAUSE);
        let until = now() + chrono::Duration::from_std(wait).unwrap_or_default();
        match self.store.endpoint_pause(endpoint, until).await {
            Ok(()) => logs.push(
                "WARN",
                format!(
                    "The receiver answered 429 with Retry-After: endpoint '{endpoint}' pauses until {} (no delivery of it starts before).",
                    until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                ),
            ),
            Err(error) => tracing::warn!(%error, endpoint, "Could not pause the endpoint after a 429."),
        }
    }

    fn failed(&self, mut error: Value, failure: &Failure, elapsed_ms: u128, logs: &mut Logs) -> Outcome {
        let message = failure.message.clone();
        error["message"] = json!(message);
        logs.push("WARN", format!("Delivery failed after {elapsed_ms} ms: {message}"));
        Outcome::Failed {
            error,
            retryable: failure.retryable,
            retry_after_ms: failure.retry_after_ms,
            receiver: if failure.retryable { ReceiverSign::Down } else { ReceiverSign::None },
            message,
        }
    }

    /// The render context: the execution's input, the endpoint's config, and the secrets its
    /// templates name. `Ok(Err(..))` when a config or secret it needs is gone. The input is
    /// moved here from the execution, not copied: the attempt needs it for nothing else, and a
    /// decoded JSON object kept while the receiver answers is memory per delivery in flight
    /// (~600 bytes for a small one; docs/benchmarks.md).
    async fn context(
        &self,
        input: Option<Value>,
        endpoint: &Endpoint,
    ) -> Result<Result<(RenderContext, Restrictions), String>, StoreError> {
        let store = &self.store;
        // The endpoint's tenant: a template's `{{secret.NAME}}` is that tenant's secret NAME,
        // and names in messages are shown as the tenant knows them (`domain::tenant`).
        let scope = Scope::of_stored(&endpoint.name);
        let config = match &endpoint.config {
            None => Value::Object(Default::default()),
            Some(name) => {
                let loaded = self
                    .configs
                    .get_or_load(name, || async {
                        Ok::<_, StoreError>(store.config_get(name).await?.map(|c| c.values))
                    })
                    .await?;
                match loaded {
                    Some(values) => values,
                    None => return Ok(Err(format!("Config '{}' no longer exists.", scope.shown(name)))),
                }
            }
        };
        let names = match self.secret_names(endpoint) {
            Ok(names) => names,
            Err(message) => return Ok(Err(message)),
        };
        let mut secrets = BTreeMap::new();
        let mut restrictions = Vec::new();
        for name in names.iter().cloned() {
            let cipher = &self.cipher;
            let stored_name = scope.stored(&name).into_owned();
            let loaded = self
                .secrets
                .get_or_load(&stored_name, || async {
                    let Some(stored) = store.secret_get(&stored_name).await? else {
                        return Ok::<_, StoreError>(None);
                    };
                    match cipher.open(&stored.name, &stored.encrypted_value) {
                        Ok(value) => Ok(Some(OpenedSecret {
                            value,
                            allowed_hosts: stored.allowed_hosts.as_deref().map(AllowedHosts::from_stored),
                        })),
                        Err(error) => {
                            tracing::error!(secret = %name, %error, "A stored secret cannot be opened.");
                            Ok(None)
                        }
                    }
                })
                .await?;
            match loaded {
                Some(OpenedSecret { value, allowed_hosts }) => {
                    if let Some(hosts) = allowed_hosts {
                        restrictions.push((name.clone(), hosts));
                    }
                    secrets.insert(name, value)
                }
                None => return Ok(Err(format!("Secret '{name}' no longer exists or cannot be opened."))),
            };
        }
        Ok(Ok((RenderContext { input: input.unwrap_or_default(), config, secrets }, restrictions)))
    }

    /// The secrets an endpoint version's templates name. A renderer plugin's templates are in
    /// its own syntax, and it gets no secrets.
    fn secret_names(&self, endpoint: &Endpoint) -> Result<Arc<Vec<String>>, String> {
        let key = TemplateKey { endpoint: endpoint.name.clone(), version: endpoint.version };
        if let Some(names) = self.secret_refs.read().expect("secret refs lock").get(&key) {
            return Ok(names.clone());
        }
        let names = match &endpoint.renderer {
            Some(_) => Vec::new(),
            None => template::check_spec("spec", &endpoint.spec)
                .map_err(|error| format!("`{}`: {}", error.field, error.message))?
                .secrets
                .into_iter()
                .collect(),
        };
        let names = Arc::new(names);
        self.secret_refs.write().expect("secret refs lock").insert(key, names.clone());
        Ok(names)
    }
}
