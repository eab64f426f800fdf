//! The `kafka` and `redis-streams` imports: a transport plugin produces to Kafka and appends to
//! Redis Streams through the built-in transports, so it gets their pooled clients, their egress
//! checks and their output shape, and adds only its own logic (transform, fan out, wrap).
//!
//! Each call is checked against the plugin's grants first (`kafka://host:port`,
//! `redis://host:port`): the destination it names, and every address that destination resolves
//! to (an internal one only when granted by address, as for HTTP). The built-in transport then
//! applies the operator's egress policy as it connects. Calls are the attempt's: the record
//! carries its execution id and trace, and must finish by its deadline.

use std::net::IpAddr;
use std::time::Instant;

use serde_json::Value;

use super::outbound::Outbound;
use super::sandbox::PluginState;
use crate::contract::specs::{
    KafkaAcks, KafkaSaslMechanism, KafkaSecurityProtocol, KafkaSpec as KafkaRecord,
    RedisStreamSpec as RedisStreamRecord,
};
use crate::contract::{kafka_imports, redis_stream_imports, specs, Failure, Message};
use crate::transport::http::HttpSpec;
use crate::transport::kafka::{Acks, KafkaSpec, Sasl, SaslMechanism, SecurityProtocol};
use crate::transport::redis_stream::{field_value, MaxLen, RedisStreamSpec};
use crate::transport::{Delivery, EndpointSpec, SpecError, Transport};

impl specs::Host for PluginState {
    async fn http_from_json(&mut self, spec_json: String) -> Result<specs::HttpSpec, String> {
        let spec: HttpSpec = from_json(&spec_json)?;
        Ok(specs::HttpSpec {
            url: spec.url,
            method: format!("{:?}", spec.method),
            headers: spec.headers.into_iter().collect(),
            body_json: spec.body_template.map(|body| body.to_string()),
            timeout_ms: spec.timeout_ms,
            expected_status_codes: spec.expected_status_codes,
        })
    }

    async fn kafka_from_json(&mut self, spec_json: String) -> Result<KafkaRecord, String> {
        let spec: KafkaSpec = from_json(&spec_json)?;
        Ok(KafkaRecord {
            bootstrap_servers: spec.bootstrap_servers,
            topic: spec.topic,
            key: spec.key_template,
            value_json: spec.value_template.to_string(),
            headers: spec.headers.into_iter().collect(),
            acks: match spec.acks {
                Acks::None => KafkaAcks::None,
                Acks::Leader => KafkaAcks::Leader,
                Acks::All => KafkaAcks::All,
            },
            timeout_ms: spec.timeout_ms,
            security_protocol: match spec.security_protocol {
                SecurityProtocol::Plaintext => KafkaSecurityProtocol::Plaintext,
                SecurityProtocol::Ssl => KafkaSecurityProtocol::Ssl,
                SecurityProtocol::SaslPlaintext => KafkaSecurityProtocol::SaslPlaintext,
                SecurityProtocol::SaslSsl => KafkaSecurityProtocol::SaslSsl,
            },
            sasl: spec.sasl.map(|sasl| specs::KafkaSasl {
                mechanism: match sasl.mechanism {
                    SaslMechanism::Plain => KafkaSaslMechanism::Plain,
                    SaslMechanism::ScramSha256 => KafkaSaslMechanism::ScramSha256,
                    SaslMechanism::ScramSha512 => KafkaSaslMechanism::ScramSha512,
                },
                username: sasl.username,
                password: sasl.password,
            }),
            ssl_ca_pem: spec.ssl_ca_pem,
        })
    }

    async fn redis_stream_from_json(&mut self, spec_json: String) -> Result<RedisStreamRecord, String> {
        let spec: RedisStreamSpec = from_json(&spec_json)?;
        let max_len = match spec.max_len {
            None => None,
            Some(MaxLen::Fixed(n)) => Some(n),
            Some(MaxLen::Template(text)) => {
                Some(text.trim().parse().map_err(|_| format!("max_len: `{text}` is not a whole number"))?)
            }
        };
        Ok(RedisStreamRecord {
            redis_url: spec.redis_url,
            stream: spec.stream,
            fields: spec.fields_template.into_iter().map(|(name, value)| (name, field_value(&value))).collect(),
            max_len,
            approximate_trimming: spec.approximate_trimming,
            timeout_ms: spec.timeout_ms,
            tls_ca_pem: spec.tls_ca_pem,
        })
    }
}

/// A built-in spec in its JSON shape, read and checked as registration does.
fn from_json<S: EndpointSpec>(spec_json: &str) -> Result<S, String> {
    let value: Value = serde_json::from_str(spec_json).map_err(|e| format!("not JSON: {e}"))?;
    crate::transport::parse_spec(&value).map_err(|e| match e.field.as_str() {
        "" => e.message,
        field => format!("{field}: {}", e.message),
    })
}

impl kafka_imports::Host for PluginState {
    async fn produce(&mut self, spec: KafkaRecord) -> Result<String, Failure> {
        let outbound = self.outbound.clone();
        let spec = kafka_spec(spec)?;
        for server in spec.bootstrap_servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (host, port) = crate::transport::kafka::host_and_port(server).ok_or_else(|| {
                Failure::invalid_spec(format!("kafka-spec.bootstrap-servers: `{server}` is not host:port"))
            })?;
            granted(&outbound, "kafka", host, port).await?;
        }
        let message = attempt_message(&outbound, "kafka.produce", &spec)?;
        let kafka = pooled(&outbound, "kafka.produce")?.kafka;
        deliver(&outbound, kafka.as_ref(), message).await
    }
}

impl redis_stream_imports::Host for PluginState {
    async fn append(&mut self, spec: RedisStreamRecord) -> Result<String, Failure> {
        let outbound = self.outbound.clone();
        let spec = redis_stream_spec(spec)?;
        let url = url::Url::parse(&spec.redis_url)
            .map_err(|e| Failure::invalid_spec(format!("redis-stream-spec.redis-url: not a valid URL ({e})")))?;
        if !matches!(url.scheme(), "redis" | "rediss") {
            return Err(Failure::invalid_spec(
                "redis-stream-spec.redis-url: a plugin reaches redis:// and rediss:// servers (no unix sockets)",
            ));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Failure::invalid_spec("redis-stream-spec.redis-url: has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        granted(&outbound, url.scheme(), &host, url.port().unwrap_or(6379)).await?;
        let message = attempt_message(&outbound, "redis-streams.append", &spec)?;
        let redis = pooled(&outbound, "redis-streams.append")?.redis_stream;
        deliver(&outbound, redis.as_ref(), message).await
    }
}

/// Refuse a destination the plugin's grants do not allow: by name and port, then each address
/// it resolves to. A refusal is recorded for the attempt, which then fails naming the grant.
async fn granted(outbound: &Outbound, scheme: &str, host: &str, port: u16) -> Result<(), Failure> {
    let target = format!("{scheme}://{host}:{port}");
    let grants = &outbound.egress.grants;
    if !grants.allows(scheme, host, port) {
        outbound.refuse_ungranted(target.clone());
        return Err(Failure::invalid_spec(format!("{target} is not granted to this plugin")));
    }
    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| Failure::connection(format!("{target}: the name does not resolve ({e})")))?
            .map(|a| a.ip())
            .collect(),
    };
    if let Some(ip) = addresses.into_iter().find(|ip| !grants.allows_address(*ip, scheme, port)) {
        let why = format!("{target} resolves to {ip}, an internal address not granted by address");
        outbound.deny(why.clone());
        return Err(Failure::invalid_spec(why));
    }
    Ok(())
}

/// The message a built-in transport delivers for this call: the attempt's identity and
/// deadline, and `spec` as its rendered spec. Outside a `deliver` call there is no attempt.
fn attempt_message(outbound: &Outbound, call: &str, spec: &impl serde::Serialize) -> Result<Message, Failure> {
    let (Some(attempt), Some(deadline)) = (&outbound.attempt, outbound.deadline) else {
        return Err(Failure::invalid_spec(format!("{call} may be called only while delivering (from `deliver`)")));
    };
    let now_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let left_ms = u64::try_from(deadline.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(u64::MAX);
    Ok(Message {
        execution_id: attempt.execution_id.clone(),
        attempt: attempt.attempt,
        idempotency_key: attempt.idempotency_key.clone(),
        deadline_ms: now_ms.saturating_add(left_ms),
        spec_json: serde_json::to_string(spec).expect("a spec serializes"),
    })
}

/// The clients this call may produce and append through.
fn pooled(outbound: &Outbound, call: &str) -> Result<crate::transport::PooledTransports, Failure> {
    outbound.egress.pooled.clone().ok_or_else(|| Failure::invalid_spec(format!("{call} is not available to this call")))
}

/// Deliver through a built-in transport in the attempt's trace; its output JSON.
async fn deliver(outbound: &Outbound, transport: &dyn Transport, message: Message) -> Result<String, Failure> {
    let delivery = Delivery::traced(outbound.traceparent.clone());
    transport.deliver(message, &delivery).await.map(|receipt| receipt.output_json)
}

/// A spec the built-in checks refuse, named as the record's field (`kafka-spec.topic`; the
/// templates of an endpoint spec are the rendered fields of a record).
fn refused(record: &str, error: SpecError) -> Failure {
    let field = match error.field.as_str() {
        "key_template" => "key".to_owned(),
        "value_template" => "value-json".to_owned(),
        "fields_template" => "fields".to_owned(),
        other => other.replace('_', "-"),
    };
    Failure::invalid_spec(format!("{record}.{field}: {}", error.message))
}

fn kafka_spec(record: KafkaRecord) -> Result<KafkaSpec, Failure> {
    let value_template: Value = serde_json::from_str(&record.value_json)
        .map_err(|e| Failure::invalid_spec(format!("kafka-spec.value-json: not JSON ({e})")))?;
    let spec = KafkaSpec {
        bootstrap_servers: record.bootstrap_servers,
        topic: record.topic,
        key_template: record.key,
        value_template,
        headers: record.headers.into_iter().collect(),
        acks: match record.acks {
            KafkaAcks::None => Acks::None,
            KafkaAcks::Leader => Acks::Leader,
            KafkaAcks::All => Acks::All,
        },
        timeout_ms: record.timeout_ms,
        security_protocol: match record.security_protocol {
            KafkaSecurityProtocol::Plaintext => SecurityProtocol::Plaintext,
            KafkaSecurityProtocol::Ssl => SecurityProtocol::Ssl,
            KafkaSecurityProtocol::SaslPlaintext => SecurityProtocol::SaslPlaintext,
            KafkaSecurityProtocol::SaslSsl => SecurityProtocol::SaslSsl,
        },
        sasl: record.sasl.map(|sasl| Sasl {
            mechanism: match sasl.mechanism {
                KafkaSaslMechanism::Plain => SaslMechanism::Plain,
                KafkaSaslMechanism::ScramSha256 => SaslMechanism::ScramSha256,
                KafkaSaslMechanism::ScramSha512 => SaslMechanism::ScramSha512,
            },
            username: sasl.username,
            password: sasl.password,
        }),
        ssl_ca_pem: record.ssl_ca_pem,
    };
    spec.validate().map_err(|e| refused("kafka-spec", e))?;
    Ok(spec)
}

fn redis_stream_spec(record: RedisStreamRecord) -> Result<RedisStreamSpec, Failure> {
    let spec = RedisStreamSpec {
        redis_url: record.redis_url,
        stream: record.stream,
        fields_template: record.fields.into_iter().map(|(name, value)| (name, Value::String(value))).collect(),
        max_len: record.max_len.map(MaxLen::Fixed),
        approximate_trimming: record.approximate_trimming,
        timeout_ms: record.timeout_ms,
        tls_ca_pem: record.tls_ca_pem,
    };
    spec.validate().map_err(|e| refused("redis-stream-spec", e))?;
    Ok(spec)
}
