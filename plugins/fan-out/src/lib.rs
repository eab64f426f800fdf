//! `fan-out`: one delivery to a Kafka topic and a Redis Stream, through the host's own Kafka and
//! Redis clients (the `kafka` and `redis-streams` imports). The spec holds a `KAFKA` and a
//! `REDIS_STREAM` endpoint spec in their usual shapes, either optional, read and checked by the
//! host as it reads its own: `{"kafka": {"bootstrap_servers": "broker:9092", "topic": "events",
//! "value_template": {"id": "{{input.id}}"}}, "redis": {"redis_url": "redis://cache:6379",
//! "stream": "events", "fields_template": {"id": "{{input.id}}"}}}`. Install it with
//! `--allow-host kafka://broker:9092 --allow-host redis://cache:6379`. A retry after one
//! destination took the message sends it to both again: consumers deduplicate on the execution
//! id the host adds (`te-execution-id` header, `te_execution_id` field).
use serde::Deserialize;
use serde_json::{json, Value};
use taskexec_plugin_sdk::{builtins, export, fail, spec, Failure, Message, Receipt, Transport};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    kafka: Option<Value>,
    redis: Option<Value>,
}

struct FanOut;
impl Transport for FanOut {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Spec = spec::parse(&spec_json)?;
        if spec.kafka.is_none() && spec.redis.is_none() {
            return Err("`kafka`, `redis`: name at least one destination".into());
        }
        if let Some(kafka) = &spec.kafka {
            builtins::kafka_spec(kafka).map_err(|e| format!("`kafka`: {e}"))?;
        }
        if let Some(redis) = &spec.redis {
            builtins::redis_stream_spec(redis).map_err(|e| format!("`redis`: {e}"))?;
        }
        Ok(())
    }

    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let spec: Spec = spec::for_delivery(&message)?;
        let mut output = json!({});
        if let Some(kafka) = &spec.kafka {
            let record = builtins::kafka_spec(kafka).map_err(|e| fail::invalid_spec(format!("kafka.{e}")))?;
            output["kafka"] = builtins::produce(&record)?;
        }
        if let Some(redis) = &spec.redis {
            let entry = builtins::redis_stream_spec(redis).map_err(|e| fail::invalid_spec(format!("redis.{e}")))?;
            output["redis"] = builtins::append(&entry)?;
        }
        Ok(Receipt::json(&output))
    }
}

export!(FanOut);
