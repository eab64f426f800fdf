//! `hostile`: a transport that misbehaves on purpose, so the tests can show the sandbox holds.
//! Its endpoint's `spec.mode` picks the misbehaviour:
//!
//! - `loop`: spins forever (the CPU deadline must stop it);
//! - `alloc`: allocates without bound (the memory cap must stop it);
//! - `panic`: panics (a trap, not a crash of the host);
//! - `forbidden-host`: calls `spec.url` over wasi:http, a host it was not granted;
//! - `log-flood`: writes 100,000 log records and 1,000 stderr lines (the host must cap them);
//! - `ok`: delivers nothing and succeeds (a control).

wit_bindgen::generate!({
    path: "../../transports-wit/wit",
    world: "transport-plugin",
    generate_all,
});

use exports::taskexec::plugin::transport::Guest;
use serde_json::Value;
use taskexec::plugin::host::log;
use taskexec::plugin::types::{Failure, FailureKind, LogLevel, Message, Receipt};
use wasi::http::types::{Fields, Method, OutgoingRequest, Scheme};

struct Hostile;

impl Guest for Hostile {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Value = serde_json::from_str(&spec_json).map_err(|e| e.to_string())?;
        match spec.get("mode").and_then(Value::as_str) {
            Some("loop" | "alloc" | "panic" | "forbidden-host" | "log-flood" | "ok") => Ok(()),
            _ => Err("`mode` must be loop, alloc, panic, forbidden-host, log-flood or ok".into()),
        }
    }

    fn deliver(message: Message) -> Result<Receipt, Failure> {
        let spec: Value = serde_json::from_str(&message.spec_json).unwrap_or_default();
        match spec.get("mode").and_then(Value::as_str).unwrap_or("ok") {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 1024 * 1024]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("hostile plugin panicked on purpose"),
            "forbidden-host" => {
                let url = spec.get("url").and_then(Value::as_str).unwrap_or("http://127.0.0.1:9/");
                let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
                let (authority, path) =
                    rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, "/".into()));
                let request = OutgoingRequest::new(Fields::new());
                let _ = request.set_method(&Method::Get);
                let _ = request.set_scheme(Some(&Scheme::Http));
                let _ = request.set_authority(Some(authority));
                let _ = request.set_path_with_query(Some(&path));
                match wasi::http::outgoing_handler::handle(request, None) {
                    Err(code) => Err(Failure {
                        kind: FailureKind::Connection,
                        retryable: true,
                        message: format!("refused: {code:?}"),
                        retry_after_ms: None,
                    }),
                    Ok(pending) => {
                        pending.subscribe().block();
                        match pending.get() {
                            Some(Ok(Ok(response))) => {
                                Ok(Receipt { output_json: format!(r#"{{"reached":{}}}"#, response.status()) })
                            }
                            other => Err(Failure {
                                kind: FailureKind::Connection,
                                retryable: true,
                                message: format!("refused: {other:?}"),
                                retry_after_ms: None,
                            }),
                        }
                    }
                }
            }
            "log-flood" => {
                for i in 0..100_000 {
                    log(LogLevel::Info, &format!("flood {i}"));
                    if i % 100 == 0 {
                        eprintln!("stderr flood {i}");
                    }
                }
                Ok(Receipt { output_json: r#"{"flooded":true}"#.into() })
            }
            _ => Ok(Receipt { output_json: format!(r#"{{"ok":"{}"}}"#, message.execution_id) }),
        }
    }
}

export!(Hostile);
