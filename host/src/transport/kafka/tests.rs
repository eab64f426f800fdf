//! The Kafka transport against librdkafka's mock cluster (the real wire protocol), read back
//! with a real consumer.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::ClientConfig;
use serde_json::{json, Value};

use std::sync::Arc;

use super::*;
use crate::contract::FailureKind;
use crate::trace::TraceParent;
use crate::transport::tests::message;
use crate::transport::Delivery;

/// The attempt's trace context a delivery is given.
const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn spec(servers: &str, topic: &str, extra: Value) -> Value {
    let mut spec = json!({"bootstrap_servers": servers, "topic": topic});
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    normalize_spec(EndpointType::Kafka, &spec).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produces_key_value_and_headers_that_a_consumer_reads_back() {
    let cluster = MockCluster::new(3).unwrap();
    cluster.create_topic("order.events.v1", 3, 1).unwrap();
    let servers = cluster.bootstrap_servers();
    let value = json!({"event_type": "created", "order_id": "order-1234", "amount": 12.5});
    let s = spec(
        &servers,
        "order.events.v1",
        json!({
            "key_template": "order-1234", "value_template": value, "headers": {"ce-type": "order.created"}, "acks": "all"
        }),
    );
    let transport = KafkaTransport::new();
    let traced = Delivery::traced(TraceParent::parse(TRACE));
    let receipt = transport.deliver(message("exec_kafka_1", &s), &traced).await.unwrap();
    let output: Value = serde_json::from_str(&receipt.output_json).unwrap();

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .set("group.id", "taskexec-test")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["order.events.v1"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let received = loop {
        assert!(Instant::now() < deadline, "the message was not consumed in time");
        if let Some(result) = consumer.poll(Duration::from_millis(100)) {
            break result.unwrap().detach();
        }
    };
    assert_eq!(received.key(), Some(&b"order-1234"[..]));
    assert_eq!(received.payload().unwrap(), serde_json::to_vec(&value).unwrap(), "value byte for byte");
    let headers = received.headers().unwrap();
    let pairs: Vec<(String, Vec<u8>)> = headers.iter().map(|h| (h.key.to_owned(), h.value.unwrap().to_vec())).collect();
    assert!(pairs.contains(&(EXECUTION_ID_HEADER.to_owned(), b"exec_kafka_1".to_vec())), "{pairs:?}");
    assert!(pairs.contains(&("ce-type".to_owned(), b"order.created".to_vec())), "{pairs:?}");
    assert!(pairs.contains(&("traceparent".to_owned(), TRACE.as_bytes().to_vec())), "{pairs:?}");
    assert_eq!(output, json!({"partition": received.partition(), "offset": received.offset()}));

    // The producer is shared by every delivery to the same cluster and settings.
    transport.deliver(message("exec_kafka_2", &s), &Delivery::default()).await.unwrap();
    assert_eq!(transport.producers.client_count().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_error_fails_the_attempt_with_its_code() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("denied", 1, 1).unwrap();
    let s = spec(
        &cluster.bootstrap_servers(),
        "denied",
        json!({"value_template": {"a": 1}, "acks": "1", "timeout_ms": 5000}),
    );
    // Every produce request is refused: not authorized for the topic (code 29).
    cluster.request_errors(RDKafkaApiKey::Produce, &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; 10]);
    let transport = KafkaTransport::new();
    let failure = transport.deliver(message("exec_denied", &s), &Delivery::default()).await.unwrap_err();
    assert_eq!(failure.kind, FailureKind::Rejected(Some(29)), "{}", failure.message);
    assert!(!failure.retryable);
    let error = transport.error_json(&failure);
    assert_eq!((error["type"].as_str(), error["code"].as_u64()), (Some("BROKER_ERROR"), Some(29)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_times_out_retryably() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let s = spec(&format!("127.0.0.1:{port}"), "t", json!({"value_template": {}, "timeout_ms": 800}));
    let failure = KafkaTransport::new().deliver(message("exec_nobody", &s), &Delivery::default()).await.unwrap_err();
    assert!(matches!(failure.kind, FailureKind::Timeout | FailureKind::Connection), "{failure:?}");
    assert!(failure.retryable);
}

#[test]
fn bootstrap_servers_are_read_as_host_and_port() {
    assert_eq!(host_and_port("kafka-1:9093"), Some(("kafka-1", 9093)));
    assert_eq!(host_and_port("PLAINTEXT://10.0.0.1:9092"), Some(("10.0.0.1", 9092)));
    assert_eq!(host_and_port("[::1]:19092"), Some(("::1", 19092)));
    assert_eq!(host_and_port("kafka"), Some(("kafka", 9092)));
    assert_eq!(host_and_port("kafka:port"), None);
    assert_eq!(host_and_port(":9092"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_egress_policy_holds_for_the_bootstrap_servers_and_every_advertised_broker() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("t", 1, 1).unwrap();
    let servers = cluster.bootstrap_servers();
    let port = host_and_port(&servers).unwrap().1;
    let s = spec(&servers, "t", json!({"value_template": {"a": 1}, "timeout_ms": 5000}));
    let deny_loopback = Arc::new(EgressPolicy::parse(None, Some("127.0.0.0/8,::1/128")).unwrap());
    let failure = KafkaTransport::with_policy(deny_loopback.clone())
        .deliver(message("exec_denied_bootstrap", &s), &Delivery::default())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::InvalidSpec, "{failure:?}");
    assert!(failure.message.contains("TE_EGRESS_DENY"), "{}", failure.message);
    // Every spelling of a loopback bootstrap server is the same address.
    for spelling in [format!("127.1:{port}"), format!("2130706433:{port}"), format!("localhost:{port}")] {
        let s = spec(&spelling, "t", json!({"value_template": {"a": 1}, "timeout_ms": 5000}));
        let transport = KafkaTransport::with_policy(deny_loopback.clone());
        let failure = transport.deliver(message("exec_spelling", &s), &Delivery::default()).await.unwrap_err();
        assert!(failure.message.contains("egress"), "{spelling}: {}", failure.message);
    }
    // The bootstrap server allowed, the broker it advertises refused: a forwarder on
    // 127.0.0.2 (allowed) leads to the mock broker, which advertises itself at 127.0.0.1.
    let forwarder = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let front = forwarder.local_addr().unwrap();
    let broker = format!("127.0.0.1:{port}");
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = forwarder.accept().await {
            let broker = broker.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(broker).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let bootstrap_only = Arc::new(EgressPolicy::parse(Some("127.0.0.2/32"), Some("127.0.0.0/8,::1/128")).unwrap());
    let s = spec(&front.to_string(), "t", json!({"value_template": {"a": 1}, "timeout_ms": 5000}));
    let failure = KafkaTransport::with_policy(bootstrap_only)
        .deliver(message("exec_broker", &s), &Delivery::default())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, FailureKind::InvalidSpec, "{failure:?}");
    assert!(failure.message.contains(&format!("advertises broker 127.0.0.1:{port}")), "{}", failure.message);
    assert_eq!(cluster_messages(&servers, "t"), 0, "nothing was produced");
}

/// How many messages `topic` holds (its high watermark, summed over partitions).
fn cluster_messages(servers: &str, topic: &str) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new().set("bootstrap.servers", servers).create().unwrap();
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| consumer.fetch_watermarks(topic, p.id(), Duration::from_secs(10)).unwrap().1)
        .sum()
}

/// A self-signed CA certificate (PEM) made with openssl, for the TLS settings.
fn test_ca_pem() -> String {
    let dir = tempfile::tempdir().unwrap();
    let (key, pem) = (dir.path().join("ca.key"), dir.path().join("ca.pem"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-subj", "/CN=te-kafka-test-ca", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&pem)
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(pem).unwrap()
}

/// SSL and SASL settings reach librdkafka as its own properties, and librdkafka (built with
/// OpenSSL) accepts them: no TLS broker runs here, so their effect is checked on the client.
#[test]
fn ssl_and_sasl_settings_reach_the_producer() {
    let ca = test_ca_pem();
    let s = spec(
        "kafka-1.example:9093",
        "t",
        json!({"value_template": {}, "security_protocol": "SASL_SSL", "ssl_ca_pem": ca,
               "sasl": {"mechanism": "SCRAM-SHA-512", "username": "svc", "password": "pa55-word-secret"}}),
    );
    let spec: KafkaSpec = serde_json::from_value(s).unwrap();
    let key = ProducerKey::from(&spec);
    let config = client_config(&key, &key.bootstrap_servers);
    assert_eq!(config.get("security.protocol"), Some("sasl_ssl"));
    assert_eq!(config.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
    assert_eq!((config.get("sasl.username"), config.get("sasl.password")), (Some("svc"), Some("pa55-word-secret")));
    assert_eq!(config.get("ssl.ca.pem"), Some(ca.as_str()));
    assert!(!format!("{key:?}").contains("pa55-word-secret"), "Debug hides the password: {key:?}");
    // librdkafka refuses ssl and SCRAM settings it was built without; a bad CA fails here too.
    let _producer = create_producer(&key, "127.0.0.1:9").expect("librdkafka takes the TLS and SCRAM settings");
    let bad_ca = ProducerKey {
        ssl_ca_pem: Some("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".into()),
        ..key.clone()
    };
    let refused = create_producer(&bad_ca, "127.0.0.1:9").err().expect("a broken CA is refused");
    assert_eq!(refused.kind, FailureKind::InvalidSpec);

    // A plaintext producer gets none of it.
    let plain = ProducerKey { security_protocol: SecurityProtocol::Plaintext, sasl: None, ssl_ca_pem: None, ..key };
    let config = client_config(&plain, "127.0.0.1:9");
    assert_eq!(config.get("security.protocol"), Some("plaintext"));
    assert_eq!(config.get("sasl.password"), None);
}

#[test]
fn security_settings_are_checked_at_registration() {
    let base = json!({"bootstrap_servers": "k:9092", "topic": "t", "value_template": {}});
    let field = |extra: Value| {
        let mut s = base.clone();
        s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        normalize_spec(EndpointType::Kafka, &s).err().map(|e| e.field)
    };
    assert_eq!(field(json!({"security_protocol": "SASL_SSL"})).as_deref(), Some("spec.sasl"));
    let sasl = json!({"mechanism": "PLAIN", "username": "u", "password": "{{secret.kafka_password}}"});
    assert_eq!(field(json!({"sasl": sasl})).as_deref(), Some("spec.sasl"), "SASL needs a SASL protocol");
    assert_eq!(field(json!({"security_protocol": "SASL_PLAINTEXT", "sasl": sasl})), None);
    assert_eq!(field(json!({"security_protocol": "PLAINTEXT", "ssl_ca_pem": "x"})).as_deref(), Some("spec.ssl_ca_pem"));
    assert_eq!(field(json!({"security_protocol": "SSL", "ssl_ca_pem": "x"})).as_deref(), Some("spec.ssl_ca_pem"));
    assert_eq!(field(json!({"security_protocol": "SSL", "ssl_ca_pem": "{{config.kafka_ca}}"})), None);
    assert_eq!(field(json!({"security_protocol": "TLS"})).as_deref().map(|f| f.starts_with("spec")), Some(true));
    let bad_mechanism = json!({"mechanism": "GSSAPI", "username": "u", "password": "p"});
    assert!(field(json!({"security_protocol": "SASL_SSL", "sasl": bad_mechanism})).is_some());
}

#[test]
fn the_hosts_of_bootstrap_servers_are_read_in_every_spelling() {
    let hosts: Vec<_> = "b1.example:9092, [::1]:9093,SASL_SSL://b3.example:9094,b4.example,10.0.0.5:9092"
        .split(',')
        .filter_map(broker_host)
        .collect();
    assert_eq!(hosts, ["b1.example", "::1", "b3.example", "b4.example", "10.0.0.5"]);
}
