use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A receiver on 127.0.0.1 that counts connections and answers each request 200 (or never).
async fn receiver(answer: bool) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let _ = socket.read(&mut buffer).await;
                if answer {
                    let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
                }
                // Held open until the client gives up.
                let _ = socket.read(&mut buffer).await;
            });
        }
    });
    (port, connections)
}

/// A receiver on 127.0.0.1 that hands its first connection to `serve`: its port, and what
/// `serve` ends with.
async fn one_connection<T, F>(
    serve: impl FnOnce(tokio::net::TcpStream) -> F + Send + 'static,
) -> (u16, tokio::task::JoinHandle<T>)
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        serve(socket).await
    });
    (port, served)
}

fn outbound(grants: &[&str]) -> Outbound {
    let texts: Vec<String> = grants.iter().map(|g| g.to_string()).collect();
    Outbound::new(Arc::new(Egress::new(Arc::new(Grants::parse(&texts).unwrap()))))
}

fn get(url: String) -> http::Request<Bytes> {
    http::Request::get(url).body(Bytes::new()).unwrap()
}

#[tokio::test]
async fn a_granted_name_is_refused_the_internal_address_it_resolves_to() {
    let (port, connections) = receiver(true).await;
    let call = outbound(&["http://localhost:*"]);
    let result = call.clone().send(get(format!("http://localhost:{port}/")), None).await;
    assert!(matches!(result, Err(Error::DestinationIpProhibited)), "{result:?}");
    let denials = call.denials();
    assert!(denials.iter().any(|d| d.contains("an internal address not granted by address")), "{denials:?}");
    assert_eq!(connections.load(Ordering::SeqCst), 0, "the refused address was connected to");
}

#[tokio::test]
async fn a_name_may_reach_an_internal_address_granted_by_address() {
    let (port, connections) = receiver(true).await;
    let call = outbound(&["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]);
    let response = call.send(get(format!("http://localhost:{port}/")), None).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn every_spelling_of_loopback_is_refused_to_a_wildcard_grant() {
    let (port, connections) = receiver(true).await;
    let call = outbound(&["http://*:*"]);
    for host in ["127.1", "2130706433", "0x7f000001", "127.0.0.1.", "0", "0177.0.0.1", "[::ffff:127.0.0.1]"] {
        let result = call.clone().send(get(format!("http://{host}:{port}/")), None).await;
        assert!(matches!(result, Err(Error::DestinationIpProhibited)), "{host}: {result:?}");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a spelling of loopback was connected to");
    // Granted by address, any spelling of that address is let through.
    let granted = outbound(&[&format!("http://127.0.0.1:{port}")]);
    assert!(granted.send(get(format!("http://127.1:{port}/")), None).await.is_ok());
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_operators_deny_list_holds_for_plugins_whatever_their_grants() {
    let (port, connections) = receiver(true).await;
    let policy = Arc::new(EgressPolicy::parse(None, Some("127.0.0.0/8,::1/128")).unwrap());
    let grants = Grants::parse(&[format!("http://127.0.0.1:{port}"), "http://localhost:*".into()]).unwrap();
    let call = Outbound::new(Arc::new(Egress::with_policy(Arc::new(grants), policy)));
    let by_address = call.clone().send(get(format!("http://127.0.0.1:{port}/")), None).await;
    assert!(matches!(by_address, Err(Error::DestinationIpProhibited)), "{by_address:?}");
    let by_name = call.clone().send(get(format!("http://localhost:{port}/")), None).await;
    assert!(by_name.is_err(), "{by_name:?}");
    assert!(call.denials().iter().all(|d| d.contains("TE_EGRESS_DENY")), "{:?}", call.denials());
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_address_in_the_url_is_checked_without_dns() {
    let (port, connections) = receiver(true).await;
    let call = outbound(&["http://*:*"]);
    let result = call.clone().send(get(format!("http://127.0.0.1:{port}/")), None).await;
    assert!(matches!(result, Err(Error::DestinationIpProhibited)), "{result:?}");
    assert!(call.denials()[0].contains("127.0.0.1"));
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_request_carries_the_calls_traceparent_and_the_urls_credentials_only_as_authorization() {
    let (port, head) = one_connection(|mut socket| async move {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            if socket.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        let _ = socket.write_all(b"HTTP/1.1 201 Created\r\nx-answer: yes\r\ncontent-length: 5\r\n\r\nhello").await;
        String::from_utf8(head).unwrap()
    })
    .await;
    let mut call = outbound(&["http://127.0.0.1:*"]);
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    call.set_traceparent(crate::trace::TraceParent::parse(traceparent));
    let answer = call.send(get(format!("http://user:p%40ss@127.0.0.1:{port}/in?x=1")), None).await.unwrap();
    assert_eq!(answer.status(), 201);
    assert_eq!(answer.headers()["x-answer"], "yes");
    assert_eq!(answer.into_body().collect().await.unwrap().to_bytes().as_ref(), b"hello");
    let head = head.await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /in?x=1 http/1.1\r\n"), "{head}");
    // base64("user:p@ss")
    assert!(head.contains("\r\nauthorization: basic dxnlcjpwqhnz\r\n"), "{head}");
    assert!(!head.contains("user:") && !head.contains("p%40ss"), "credentials outside Authorization: {head}");
    assert!(head.contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")), "{head}");
    assert!(head.contains(&format!("\r\ntraceparent: {traceparent}\r\n")), "{head}");
}

#[tokio::test]
async fn a_connection_never_made_is_refused_and_one_cut_short_is_terminated() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let call = outbound(&["http://127.0.0.1:*"]);
    let refused = call.clone().send(get(format!("http://127.0.0.1:{closed}/")), None).await;
    assert!(matches!(refused, Err(Error::ConnectionRefused)), "{refused:?}");

    let (port, _) = one_connection(|mut socket| async move {
        let mut buffer = [0u8; 4096];
        let _ = socket.read(&mut buffer).await;
        let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this").await;
    })
    .await;
    let cut = call.send(get(format!("http://127.0.0.1:{port}/")), None).await;
    assert!(matches!(cut, Err(Error::ConnectionTerminated)), "{cut:?}");
}

#[tokio::test]
async fn a_call_dropped_while_waiting_closes_its_request() {
    let (read_tx, read_rx) = tokio::sync::oneshot::channel();
    let (port, closed) = one_connection(|mut socket| async move {
        let mut buffer = [0u8; 4096];
        let _ = socket.read(&mut buffer).await;
        let _ = read_tx.send(());
        // Never answers: the only way this read ends is the client closing the connection.
        socket.read(&mut buffer).await.unwrap()
    })
    .await;
    let call = outbound(&["http://127.0.0.1:*"]);
    let sending = tokio::spawn(call.send(get(format!("http://127.0.0.1:{port}/")), None));
    read_rx.await.unwrap();
    sending.abort();
    let read = tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .expect("the request outlived the call that sent it")
        .unwrap();
    assert_eq!(read, 0, "the connection was closed");
}

#[tokio::test]
async fn a_request_never_outlasts_its_call() {
    let (port, _) = receiver(false).await;
    let mut call = outbound(&["http://127.0.0.1:*"]);
    call.set_deadline(Instant::now() + Duration::from_millis(200));
    // No request options: the call's deadline alone must end the wait.
    let sent = tokio::time::timeout(Duration::from_secs(10), call.send(get(format!("http://127.0.0.1:{port}/")), None))
        .await
        .expect("the request outlasted its call's deadline");
    assert!(matches!(sent, Err(Error::ConnectionReadTimeout)), "{sent:?}");
}

#[tokio::test]
async fn an_answer_whose_body_stalls_ends_at_the_deadline_too() {
    let addr = crate::transport::tests::stalling_receiver().await;
    let mut call = outbound(&["http://127.0.0.1:*"]);
    call.set_deadline(Instant::now() + Duration::from_millis(200));
    let sent = tokio::time::timeout(Duration::from_secs(10), call.send(get(format!("http://{addr}/")), None))
        .await
        .expect("the body's read outlasted its call's deadline");
    assert!(matches!(sent, Err(Error::ConnectionReadTimeout)), "{sent:?}");
}
