//! wasi:http as plugins call it: the host's own `outgoing-handler.handle` and
//! `future-incoming-response.get`, linked in place of wasmtime-wasi-http's.
//!
//! wasmtime-wasi-http's own `handle` spawns a task for every request and a second for its
//! connection, and hands the response to the plugin through a join handle: a request and its
//! answer cross three tasks, each a wake-up that this service's plugin benchmark measured at
//! tens of microseconds on a small machine. Here, a request whose body the plugin has finished
//! writing before it calls `handle` (every request without a body, and every plugin that writes
//! its body first, as `transports-wit/README.md` advises) is sent on the plugin call's own task,
//! and `handle` returns with the response already there — the same path the native HTTP
//! transport takes; `future-incoming-response.get` is ours too, to hand that response over
//! without a task beside it. A request whose body is still being written is sent from a spawned
//! task, as wasmtime-wasi-http does, so a plugin may still stream its body after `handle`. The
//! grant checks are [`super::outbound`]'s.

use std::task::{Context, Poll, Waker};

use axum::body::{Bytes, HttpBody};
use axum::http;
use http_body_util::BodyExt;
use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi_http::p2::bindings::http::types::{
    ErrorCode, HostFutureIncomingResponse as HostFutureIncomingResponseMethods, Scheme,
};
use wasmtime_wasi_http::p2::body::HostIncomingBody;
use wasmtime_wasi_http::p2::types::{HostFutureIncomingResponse, HostIncomingResponse, HostOutgoingRequest};
use wasmtime_wasi_http::{Error, FieldMap, RequestOptions, WasiBody, WasiHttpView};

use super::sandbox::PluginState;

/// The interface `handle` is defined in. Guests importing any 0.2.x version link to it.
const OUTGOING_HANDLER: &str = "wasi:http/outgoing-handler@0.2.12";
/// The interface of wasi:http's resources, wasmtime-wasi-http's but for one function.
const HTTP_TYPES: &str = "wasi:http/types@0.2.12";

/// Define `wasi:http/outgoing-handler.handle` in `linker` (the `types` interface is
/// wasmtime-wasi-http's, linked beside it).
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.instance(OUTGOING_HANDLER)?.func_wrap_async(
        "handle",
        |store: StoreContextMut<'_, PluginState>,
         (request, options): (Resource<HostOutgoingRequest>, Option<Resource<RequestOptions>>)| {
            Box::new(async move { Ok((handle(store, request, options).await?,)) })
        },
    )?;
    // In place of wasmtime-wasi-http's `get`, which wants a task to keep alive beside each
    // response: the requests sent here have none, and spawning one for each wakes another
    // worker thread per delivery.
    linker.allow_shadowing(true);
    let defined = linker.instance(HTTP_TYPES)?.func_wrap(
        "[method]future-incoming-response.get",
        |mut store: StoreContextMut<'_, PluginState>, (future,): (Resource<HostFutureIncomingResponse>,)| {
            Ok((future_response_get(store.data_mut(), future)?,))
        },
    );
    linker.allow_shadowing(false);
    defined
}

/// What `get` gives a plugin once its request is done: `Err(())` if the response was taken
/// already, else the response or why there is none.
type Answer = Result<Result<Resource<HostIncomingResponse>, ErrorCode>, ()>;

/// `future-incoming-response.get`: the response `handle` already has, else whatever
/// wasmtime-wasi-http's `get` answers (a request still under way, an error, a second `get`).
fn future_response_get(
    state: &mut PluginState,
    future: Resource<HostFutureIncomingResponse>,
) -> wasmtime::Result<Option<Answer>> {
    if let Some(response) = state.answered.remove(&future.rep()) {
        let (parts, body) = response.into_parts();
        let headers = FieldMap::new_immutable(&mut state.outbound, parts.headers);
        let body = Some(HostIncomingBody::new(body));
        let response = state.table.push(HostIncomingResponse { status: parts.status.as_u16(), headers, body })?;
        return Ok(Some(Ok(Ok(response))));
    }
    HostFutureIncomingResponseMethods::get(&mut state.http(), future)
}

async fn handle(
    mut store: StoreContextMut<'_, PluginState>,
    request: Resource<HostOutgoingRequest>,
    options: Option<Resource<RequestOptions>>,
) -> wasmtime::Result<Result<Resource<HostFutureIncomingResponse>, ErrorCode>> {
    let state = store.data_mut();
    let options = options.and_then(|o| state.table.get(&o).ok()).cloned();
    let request = state.table.delete(request)?;
    let outbound = state.outbound.clone();
    let (head, mut body) = match request_head(request) {
        Ok(prepared) => prepared,
        Err(code) => return Ok(Err(code)),
    };
    let mut written = Vec::new();
    let (future, answered) = match body.as_mut().map(|b| take_written(b, &mut written)).unwrap_or(Ok(true)) {
        Err(error) => (HostFutureIncomingResponse::Ready(Err(error)), None),
        Ok(true) => match outbound.send(head.map(|()| Bytes::from(written)), options).await {
            Ok(response) => (HostFutureIncomingResponse::Consumed, Some(response)),
            Err(error) => (HostFutureIncomingResponse::Ready(Err(error)), None),
        },
        Ok(false) => {
            let body = body.expect("an unfinished body exists");
            let sending = wasmtime_wasi::runtime::spawn(async move {
                written.extend_from_slice(&body.collect().await?.to_bytes());
                let response = outbound.send(head.map(|()| Bytes::from(written)), options).await?;
                // The task kept beside the response is this one, finished by then.
                Ok((response, wasmtime_wasi::runtime::spawn(async {})))
            });
            (HostFutureIncomingResponse::Pending(sending), None)
        }
    };
    let state = store.data_mut();
    let future = state.table.push(future)?;
    // Every future-incoming-response is made here, so a number reused after a drop never
    // finds an earlier request's answer; answers the plugin dropped untaken are let go.
    let table = &state.table;
    state.answered.retain(|rep, _| table.get(&Resource::<HostFutureIncomingResponse>::new_borrow(*rep)).is_ok());
    match answered {
        Some(response) => state.answered.insert(future.rep(), response),
        None => state.answered.remove(&future.rep()),
    };
    Ok(Ok(future))
}

/// The request line and headers the plugin built, checked as wasmtime-wasi-http checks them,
/// and its body (None when it never asked for one).
fn request_head(request: HostOutgoingRequest) -> Result<(http::Request<()>, Option<WasiBody>), ErrorCode> {
    // A body's writes are checked against `content-length` as they are made; a request that
    // never asked for a body must not announce one.
    if request.body.is_none() {
        if let Some(value) = request.headers.get(http::header::CONTENT_LENGTH) {
            let digits = value.to_str().ok().filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
            match digits.map(str::parse::<u64>) {
                Some(Ok(0)) => {}
                Some(Ok(_)) => return Err(ErrorCode::HttpRequestBodySize(Some(0))),
                _ => return Err(ErrorCode::InternalError(Some("invalid `content-length` header".into()))),
            }
        }
    }
    let method: http::Method = request.method.try_into().map_err(|_| ErrorCode::HttpRequestMethodInvalid)?;
    let scheme = match request.scheme {
        Some(Scheme::Http) => http::uri::Scheme::HTTP,
        None | Some(Scheme::Https) => http::uri::Scheme::HTTPS,
        Some(Scheme::Other(_)) => return Err(ErrorCode::HttpProtocolError),
    };
    let uri = http::Uri::builder()
        .scheme(scheme)
        .authority(request.authority.unwrap_or_default())
        .path_and_query(request.path_with_query.unwrap_or_else(|| "/".to_owned()))
        .build()
        .map_err(|_| ErrorCode::HttpRequestUriInvalid)?;
    let mut head =
        http::Request::builder().method(method).uri(uri).body(()).map_err(|_| ErrorCode::HttpRequestUriInvalid)?;
    *head.headers_mut() = request.headers.into();
    Ok((head, request.body))
}

/// Move what the plugin has written of `body` into `into` without waiting; true when the body
/// is finished (trailers, which the client cannot send, are dropped as before).
fn take_written(body: &mut WasiBody, into: &mut Vec<u8>) -> Result<bool, Error> {
    let mut context = Context::from_waker(Waker::noop());
    loop {
        match std::pin::Pin::new(&mut *body).poll_frame(&mut context) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    into.extend_from_slice(&data);
                }
            }
            Poll::Ready(Some(Err(error))) => return Err(error),
            Poll::Ready(None) => return Ok(true),
            Poll::Pending => return Ok(false),
        }
    }
}
