//! `hostile`: a transport that misbehaves on purpose, so the tests can show the sandbox holds.
//! Its endpoint's `spec.mode` picks the misbehaviour:
//!
//! - `loop`: spins forever (the CPU deadline must stop it);
//! - `alloc`: allocates without bound (the memory cap must stop it);
//! - `panic`: panics (a trap, not a crash of the host);
//! - `forbidden-host`: calls `spec.url` over wasi:http, a host it was not granted;
//! - `log-flood`: writes 100,000 log records, 1,000 stderr lines and 100,000 bytes to stdout
//!   (the host must cap them, and the call must not fail for it);
//! - `stream-body`: POSTs `spec.size` bytes to `spec.url`, written in 4 KiB pieces *after*
//!   calling `handle`, more than the host buffers before sending (the streamed-body path);
//! - `answer-twice`: POSTs twice to `spec.url` (bodies finished before `handle`), leaves the
//!   first answer untaken and asks for the second twice; succeeds only if the second `get`
//!   finds it taken, as wasi:http says;
//! - `one-call`: sends through `http-client` what a well-behaved SDK never would — to
//!   `spec.url` (a mirror) 100 bytes with `max-response-bytes` 10, then with a `Connection`
//!   header, then to `spec.ungranted` — and returns what each got, for the test to judge;
//! - `remember`: keeps what a plugin should not rely on — a count of its calls and the last
//!   call's `spec.mark` — in globals, and returns both (`{"calls": n, "previous": mark}`);
//!   panics on the call numbered `spec.panic_at`. Shows what an instance carries from one
//!   delivery to the next when it is reused (`calls_per_instance`);
//! - `ok`: delivers nothing and succeeds (a control).

use serde_json::Value;
use taskexec_plugin_sdk::bindings::taskexec::plugin::host::log;
use taskexec_plugin_sdk::bindings::wasi::http::outgoing_handler;
use taskexec_plugin_sdk::bindings::wasi::http::types::{
    Fields, FutureIncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use taskexec_plugin_sdk::{export, Failure, FailureKind, LogLevel, Message, Receipt, Transport};

struct Hostile;

impl Transport for Hostile {
    fn validate(spec_json: String) -> Result<(), String> {
        let spec: Value = serde_json::from_str(&spec_json).map_err(|e| e.to_string())?;
        match spec.get("mode").and_then(Value::as_str) {
            Some(
                "loop" | "alloc" | "panic" | "forbidden-host" | "log-flood" | "deny-flood" | "stream-body" | "answer-twice" | "one-call" | "remember" | "ok",
            ) => Ok(()),
            _ => {
                Err("`mode` must be loop, alloc, panic, forbidden-host, log-flood, deny-flood, stream-body, answer-twice, one-call, remember or ok"
                    .into())
            }
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
                let (scheme, authority, path) = target(&spec);
                let request = OutgoingRequest::new(Fields::new());
                let _ = request.set_method(&Method::Get);
                let _ = request.set_scheme(Some(&scheme));
                let _ = request.set_authority(Some(&authority));
                let _ = request.set_path_with_query(Some(&path));
                match outgoing_handler::handle(request, None) {
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
            "deny-flood" => {
                // 12,000 requests to a host it was not granted, each refused, then success.
                let (scheme, authority, path) = target(&spec);
                for _ in 0..12_000 {
                    let request = OutgoingRequest::new(Fields::new());
                    let _ = request.set_method(&Method::Get);
                    let _ = request.set_scheme(Some(&scheme));
                    let _ = request.set_authority(Some(&authority));
                    let _ = request.set_path_with_query(Some(&path));
                    let _ = outgoing_handler::handle(request, None);
                }
                Ok(Receipt { output_json: r#"{"denied_flood":true}"#.into() })
            }
            "stream-body" => stream_body(&spec),
            "answer-twice" => answer_twice(&spec),
            "one-call" => one_call(&spec),
            "remember" => remember(&spec),
            "log-flood" => {
                for i in 0..100_000 {
                    log(LogLevel::Info, &format!("flood {i}"));
                    if i % 100 == 0 {
                        eprintln!("stderr flood {i}");
                    }
                }
                // More than the host keeps of stdout, in one line: `println!` panics if the
                // stream says it is closed.
                println!("{}", "x".repeat(100_000));
                Ok(Receipt { output_json: r#"{"flooded":true}"#.into() })
            }
            _ => Ok(Receipt { output_json: format!(r#"{{"ok":"{}"}}"#, message.execution_id) }),
        }
    }
}

/// Calls this instance has made, and the `mark` of the last one.
static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static LAST_MARK: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn remember(spec: &Value) -> Result<Receipt, Failure> {
    let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let mark = spec.get("mark").and_then(Value::as_str).unwrap_or_default().to_owned();
    let previous = std::mem::replace(&mut *LAST_MARK.lock().unwrap(), mark);
    if spec.get("panic_at").and_then(Value::as_u64) == Some(calls) {
        panic!("hostile plugin panicked on call {calls}, on purpose");
    }
    Ok(Receipt { output_json: serde_json::json!({"calls": calls, "previous": previous}).to_string() })
}

/// `scheme://authority/path` of `spec.url`, split for wasi:http.
fn target(spec: &Value) -> (Scheme, String, String) {
    let url = spec.get("url").and_then(Value::as_str).unwrap_or("http://127.0.0.1:9/");
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let (authority, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, "/".into()));
    (if scheme == "https" { Scheme::Https } else { Scheme::Http }, authority.to_owned(), path)
}

fn failed(message: String) -> Failure {
    Failure { kind: FailureKind::Connection, retryable: false, message, retry_after_ms: None }
}

/// Send a body that is written only after `handle`: byte `i` of it is `i % 251`.
fn stream_body(spec: &Value) -> Result<Receipt, Failure> {
    let size = spec.get("size").and_then(Value::as_u64).unwrap_or(100_000) as usize;
    let (scheme, authority, path) = target(spec);
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_method(&Method::Post);
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(&authority));
    let _ = request.set_path_with_query(Some(&path));
    let outgoing = request.body().map_err(|_| failed("no body".into()))?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| failed(format!("{e:?}")))?;
    {
        let stream = outgoing.write().map_err(|_| failed("no body stream".into()))?;
        let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        for chunk in body.chunks(4096) {
            stream.blocking_write_and_flush(chunk).map_err(|e| failed(format!("write: {e:?}")))?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| failed(format!("finish: {e:?}")))?;
    pending.subscribe().block();
    match pending.get() {
        Some(Ok(Ok(response))) => Ok(Receipt { output_json: format!(r#"{{"status_code":{}}}"#, response.status()) }),
        other => Err(failed(format!("no response: {other:?}"))),
    }
}

/// POST a small body, written and finished before `handle`, to `spec.url` + `suffix`.
fn send_finished(spec: &Value, suffix: &str) -> Result<FutureIncomingResponse, Failure> {
    let (scheme, authority, path) = target(spec);
    let request = OutgoingRequest::new(Fields::new());
    let _ = request.set_method(&Method::Post);
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(&authority));
    let _ = request.set_path_with_query(Some(&format!("{path}{suffix}")));
    let outgoing = request.body().map_err(|_| failed("no body".into()))?;
    {
        let stream = outgoing.write().map_err(|_| failed("no body stream".into()))?;
        stream.blocking_write_and_flush(b"{}").map_err(|e| failed(format!("write: {e:?}")))?;
    }
    OutgoingBody::finish(outgoing, None).map_err(|e| failed(format!("finish: {e:?}")))?;
    outgoing_handler::handle(request, None).map_err(|e| failed(format!("{e:?}")))
}

/// Leave one answer untaken (its future dropped) and ask for another twice: the second `get`
/// must find it taken, as wasi:http says.
fn answer_twice(spec: &Value) -> Result<Receipt, Failure> {
    drop(send_finished(spec, "/untaken")?);
    let pending = send_finished(spec, "")?;
    let first = match pending.get() {
        Some(answer) => Some(answer),
        None => {
            pending.subscribe().block();
            pending.get()
        }
    };
    match (first, pending.get()) {
        (Some(Ok(Ok(response))), Some(Err(()))) => {
            Ok(Receipt { output_json: format!(r#"{{"status_code":{}}}"#, response.status()) })
        }
        (first, second) => Err(failed(format!("first get: {first:?}; second get: {second:?}"))),
    }
}

export!(Hostile);

/// Three requests through `http-client.send`, and what each got, as the receipt.
fn one_call(spec: &Value) -> Result<Receipt, Failure> {
    use taskexec_plugin_sdk::bindings::taskexec::plugin::http_client::{self, send, Request, SendError};
    let url = spec.get("url").and_then(Value::as_str).unwrap_or_default().to_owned();
    let ungranted = spec.get("ungranted").and_then(Value::as_str).unwrap_or_default().to_owned();
    let request = |url: &str, headers: Vec<(String, Vec<u8>)>| Request {
        method: "POST".into(),
        url: url.to_owned(),
        headers,
        body: (0..100u8).map(|i| b'a' + i % 26).collect(),
        first_byte_timeout_ms: Some(5_000),
        max_response_bytes: 10,
    };
    let tagged = vec![("x-tag".to_owned(), b"one".to_vec()), ("X-Tag".to_owned(), b"two".to_vec())];
    let mirrored = match send(&request(&url, tagged)) {
        Ok(answer) => serde_json::json!({
            "status": answer.status,
            "body": String::from_utf8_lossy(&answer.body),
            "truncated": answer.truncated,
        }),
        Err(error) => return Err(failed(format!("the mirror was not reached: {error:?}"))),
    };
    let error_text = |result: Result<http_client::Response, SendError>| match result {
        Ok(answer) => format!("answered {}", answer.status),
        Err(SendError::InvalidRequest(why)) => format!("invalid-request: {why}"),
        Err(SendError::NotGranted(destination)) => format!("not-granted: {destination}"),
        Err(other) => format!("{other:?}"),
    };
    let hop_by_hop = error_text(send(&request(&url, vec![("Connection".into(), b"close".to_vec())])));
    let refused = error_text(send(&request(&ungranted, Vec::new())));
    Ok(Receipt {
        output_json: serde_json::json!({"mirrored": mirrored, "hop_by_hop": hop_by_hop, "ungranted": refused})
            .to_string(),
    })
}
