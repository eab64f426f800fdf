//! The HTTP/1.1 client against receivers on raw TCP on 127.0.0.1 (so they can frame answers
//! every way HTTP/1.1 allows, and break the protocol), and against `openssl s_server` for TLS.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hyper::{StatusCode, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// Resolves nothing: these tests connect to addresses.
struct NoNames;

impl Resolve for NoNames {
    fn resolve(&self, name: &str) -> super::super::client::Resolving {
        let name = name.to_owned();
        Box::pin(async move { Err(format!("{name} is not resolved in these tests").into()) })
    }
}

/// A receiver on raw TCP: `answer` runs for each accepted connection (with its index, from 0);
/// every request head it reads is kept.
struct Raw {
    base: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Raw {
    async fn start<F, Fut>(answer: F) -> Self
    where
        F: Fn(usize, Conversation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::io::Result<()>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (counted, seen) = (connections.clone(), requests.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let index = counted.fetch_add(1, Ordering::SeqCst);
                let conversation = Conversation { stream, pending: Vec::new(), seen: seen.clone() };
                tokio::spawn(answer(index, conversation));
            }
        });
        Self { base, connections, requests }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// One accepted connection, as the receiver sees it.
struct Conversation {
    stream: TcpStream,
    pending: Vec<u8>,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Conversation {
    /// The next request (head and `Content-Length` body) as text; `None` when the client
    /// closed the connection.
    async fn request(&mut self) -> std::io::Result<Option<String>> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(end) = self.pending.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.pending[..end + 4]).into_owned();
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if self.pending.len() >= end + 4 + length {
                    let whole: Vec<u8> = self.pending.drain(..end + 4 + length).collect();
                    let text = String::from_utf8_lossy(&whole).into_owned();
                    self.seen.lock().unwrap().push(text.clone());
                    return Ok(Some(text));
                }
            }
            let n = self.stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(None);
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }
}

/// Answer every request on the connection with `answer`.
async fn keep_answering(mut conversation: Conversation, answer: &'static [u8]) -> std::io::Result<()> {
    while conversation.request().await?.is_some() {
        conversation.write(answer).await?;
    }
    Ok(())
}

fn client() -> H1Client {
    H1Client::new(NoNames)
}

fn post(url: &str, body: &[u8]) -> Outgoing {
    Outgoing { method: Method::POST, url: url.parse().unwrap(), headers: HeaderMap::new(), body: Some(body.to_vec()) }
}

async fn send(client: &H1Client, outgoing: Outgoing, limit: usize) -> Result<Answer, String> {
    client.send(outgoing, Duration::from_secs(10), limit).await.map_err(|e| match e {
        SendError::Timeout => "timeout".to_owned(),
        SendError::Failed(e) => crate::error_chain::describe(e.as_ref()),
    })
}

/// The error of a send that must fail (an answer is not printed whole: it may be large).
async fn fails(client: &H1Client, outgoing: Outgoing) -> String {
    match send(client, outgoing, 1024).await {
        Ok(answer) => panic!("answered {} with {} body bytes", answer.response.status, answer.body.len()),
        Err(error) => error,
    }
}

#[tokio::test]
async fn writes_the_request_line_host_length_and_headers_and_never_the_credentials() {
    let raw = Raw::start(|_, c| keep_answering(c, b"HTTP/1.1 204 No Content\r\n\r\n")).await;
    let url = raw.base.replace("http://", "http://ops:s%3Acret@") + "/hooks/a?x=1&y=two#frag";
    let mut outgoing = post(&url, b"{\"a\":1}");
    outgoing.headers.insert("x-custom", HeaderValue::from_static("value"));
    // Framing is the client's: a spec's own length cannot make the receiver misread the body.
    outgoing.headers.insert(CONTENT_LENGTH, HeaderValue::from_static("999"));
    let answer = send(&client(), outgoing, 1024).await.unwrap();
    assert_eq!(answer.response.status, StatusCode::NO_CONTENT);
    let request = raw.requests().pop().unwrap();
    let host = raw.base.trim_start_matches("http://");
    assert!(request.starts_with("POST /hooks/a?x=1&y=two HTTP/1.1\r\n"), "{request}");
    assert!(request.contains(&format!("\r\nhost: {host}\r\n")), "{request}");
    assert!(request.contains("\r\nx-custom: value\r\n"));
    assert!(request.contains("\r\nauthorization: Basic b3BzOnM6Y3JldA==\r\n"), "{request}");
    assert!(request.contains(&format!("\r\nuser-agent: {DEFAULT_USER_AGENT}\r\n")));
    assert_eq!(request.matches("content-length").count(), 1, "{request}");
    assert!(request.ends_with("\r\ncontent-length: 7\r\n\r\n{\"a\":1}"), "{request}");
    assert!(!request.contains("frag") && !request.contains("ops"), "{request}");

    // A GET without a body says no length; a POST without one says 0 (nginx answers 411 else).
    let get = Outgoing { method: Method::GET, url: raw.base.parse().unwrap(), headers: HeaderMap::new(), body: None };
    send(&client(), get, 1024).await.unwrap();
    let request = raw.requests().pop().unwrap();
    assert!(request.starts_with("GET / HTTP/1.1\r\n") && !request.contains("content-length"), "{request}");
    let empty = Outgoing { body: None, ..post(&raw.base, b"") };
    send(&client(), empty, 1024).await.unwrap();
    assert!(raw.requests().pop().unwrap().contains("\r\ncontent-length: 0\r\n"));
}

#[tokio::test]
async fn keeps_a_connection_for_the_next_request_when_the_answer_allows() {
    let raw = Raw::start(|_, c| keep_answering(c, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")).await;
    let client = client();
    for _ in 0..3 {
        let answer = send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
        assert_eq!(answer.body, b"ok");
    }
    assert_eq!(raw.connections(), 1, "one connection for three requests");

    // `Connection: close` from either side, or HTTP/1.0, ends the connection with the answer.
    let closing =
        Raw::start(|_, c| keep_answering(c, b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
            .await;
    let old = Raw::start(|_, c| keep_answering(c, b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")).await;
    // Framed two ways: read by the chunks, and the connection not trusted after it.
    let twice = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    let twice = Raw::start(move |_, c| keep_answering(c, twice)).await;
    for raw in [&closing, &old, &twice] {
        send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
        send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
        assert_eq!(raw.connections(), 2);
    }
    let asked = Raw::start(|_, c| keep_answering(c, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")).await;
    for _ in 0..2 {
        let mut outgoing = post(&asked.base, b"x");
        outgoing.headers.insert(CONNECTION, HeaderValue::from_static("close"));
        send(&client, outgoing, 1024).await.unwrap();
    }
    assert_eq!(asked.connections(), 2);
}

#[tokio::test]
async fn reads_chunked_bodies_after_interim_answers_and_cuts_them_at_the_limit() {
    let chunked: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
        5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";
    let raw = Raw::start(move |_, c| keep_answering(c, chunked)).await;
    let client = client();
    let answer = send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
    assert_eq!(
        (answer.response.status, answer.body.as_slice(), answer.truncated),
        (StatusCode::OK, &b"hello, world"[..], false)
    );
    // Read to its end, so the connection carries the next request.
    let cut = send(&client, post(&raw.base, b"x"), 8).await.unwrap();
    assert_eq!((cut.body.as_slice(), cut.truncated), (&b"hello, w"[..], true));
    assert_eq!(raw.connections(), 1);
    // A cut body leaves the rest unread: that connection is not reused.
    send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
    assert_eq!(raw.connections(), 2);

    // Exactly the limit is not a cut; one byte over is.
    let sized = Raw::start(|_, c| keep_answering(c, b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd")).await;
    assert!(!send(&client, post(&sized.base, b"x"), 4).await.unwrap().truncated);
    let over = send(&client, post(&sized.base, b"x"), 3).await.unwrap();
    assert_eq!((over.body.as_slice(), over.truncated), (&b"abc"[..], true));
}

#[tokio::test]
async fn a_body_without_length_ends_with_the_connection() {
    let raw = Raw::start(|_, mut c| async move {
        c.request().await?;
        c.write(b"HTTP/1.1 200 OK\r\n\r\nuntil ").await?;
        c.write(b"the close").await
    })
    .await;
    let client = client();
    let answer = send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
    assert_eq!(answer.body, b"until the close");
    send(&client, post(&raw.base, b"x"), 1024).await.unwrap();
    assert_eq!(raw.connections(), 2);
}

#[tokio::test]
async fn a_request_on_a_connection_the_receiver_closed_goes_again_on_a_new_one() {
    // The first connection answers once, then reads the next request and hangs up unanswered,
    // as a receiver closing an idle connection does when the request crosses its close.
    let raw = Raw::start(|index, mut c| async move {
        c.request().await?;
        c.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none").await?;
        if index == 0 {
            c.request().await?;
            return Ok(());
        }
        keep_answering(c, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo").await
    })
    .await;
    let client = client();
    assert_eq!(send(&client, post(&raw.base, b"1"), 1024).await.unwrap().body, b"one");
    assert_eq!(send(&client, post(&raw.base, b"2"), 1024).await.unwrap().body, b"one");
    assert_eq!(raw.connections(), 2);
    assert_eq!(raw.requests().len(), 3, "the second request was sent twice: {:?}", raw.requests());

    // On a new connection, a hang-up without an answer is the attempt's error: not sent again.
    let hangs_up = Raw::start(|_, mut c| async move { c.request().await.map(drop) }).await;
    let error = fails(&client, post(&hangs_up.base, b"x")).await;
    assert!(error.contains("closed before the response was complete"), "{error}");
    assert_eq!(hangs_up.requests().len(), 1);
}

#[tokio::test]
async fn a_receiver_that_breaks_the_protocol_gets_an_error_naming_what_it_broke() {
    let cases: [(&'static [u8], &str); 6] = [
        (b"HTTP/1.1 abc OK\r\n\r\n", "not valid HTTP/1.1"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "Content-Length is given twice"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length is not a number"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size is not a hexadecimal"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "runs past its size"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols"),
    ];
    let client = client();
    for (answer, expected) in cases {
        let raw = Raw::start(move |_, c| keep_answering(c, answer)).await;
        let error = fails(&client, post(&raw.base, b"x")).await;
        assert!(error.contains(expected), "{expected}: {error}");
    }
    let many = Raw::start(|_, mut c| async move {
        c.request().await?;
        let mut head = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..150 {
            head.push_str(&format!("X-{i}: {i}\r\n"));
        }
        c.write(format!("{head}\r\n").as_bytes()).await
    })
    .await;
    let error = fails(&client, post(&many.base, b"x")).await;
    assert!(error.contains("too large: more than 100 header fields"), "{error}");
    let huge = Raw::start(|_, mut c| async move {
        c.request().await?;
        c.write(format!("HTTP/1.1 200 OK\r\nX-Big: {}\r\n\r\n", "b".repeat(100_000)).as_bytes()).await
    })
    .await;
    let error = fails(&client, post(&huge.base, b"x")).await;
    assert!(error.contains("too large: more than 65536 bytes"), "{error}");
    let cut = Raw::start(|_, mut c| async move {
        c.request().await?;
        c.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").await
    })
    .await;
    let error = fails(&client, post(&cut.base, b"x")).await;
    assert!(error.contains("closed before the response was complete"), "{error}");
}

#[tokio::test]
async fn nothing_listening_is_a_connect_error_and_a_name_goes_through_the_resolver() {
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let error = fails(&client(), post(&format!("http://127.0.0.1:{port}/"), b"x")).await;
    assert!(error.starts_with("tcp connect error: "), "{error}");
    let error = fails(&client(), post("http://receiver.test/", b"x")).await;
    assert_eq!(error, "dns error: receiver.test is not resolved in these tests");
}

#[tokio::test]
async fn an_idle_connection_is_open_until_the_receiver_closes_it_or_talks_unasked() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let mut idle = Conn::Plain(TcpStream::connect(address).await.unwrap());
    let (mut receiver, _) = listener.accept().await.unwrap();
    assert!(idle.is_open());
    drop(receiver);
    let deadline = Instant::now() + Duration::from_secs(5);
    while idle.is_open() {
        assert!(Instant::now() < deadline, "the receiver's close was not seen in 5 s");
        tokio::task::yield_now().await;
    }

    let mut idle = Conn::Plain(TcpStream::connect(address).await.unwrap());
    (receiver, _) = listener.accept().await.unwrap();
    receiver.write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while idle.is_open() {
        assert!(Instant::now() < deadline, "an answer nobody asked for was not seen in 5 s");
        tokio::task::yield_now().await;
    }
    drop(receiver);
}

/// `openssl s_server -www` on 127.0.0.1 with a certificate for 127.0.0.1 from a CA made here:
/// the client verifies the chain and the address, then reads an HTTP/1.0 answer that ends with
/// the connection.
#[tokio::test]
async fn https_verifies_the_receiver_s_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let ca = crate::transport::tests::make_certificates(dir.path());
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let server = std::process::Command::new("openssl")
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-cert",
            &path("server.pem"),
            "-key",
            &path("server.key"),
            "-www",
            "-quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _server = KillOnDrop(server);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(Instant::now() < deadline, "openssl s_server did not listen in 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = format!("https://127.0.0.1:{port}/");
    let get = || Outgoing { method: Method::GET, url: url.parse().unwrap(), headers: HeaderMap::new(), body: None };

    let mut roots = rustls::RootCertStore::empty();
    let ca = <rustls::pki_types::CertificateDer as rustls::pki_types::pem::PemObject>::from_pem_slice(ca.as_bytes());
    let ca = ca.unwrap();
    roots.add(ca).unwrap();
    let trusting = H1Client::with_roots(NoNames, roots);
    let answer = send(&trusting, get(), 64 * 1024).await.unwrap();
    assert_eq!((answer.response.status, answer.response.version), (StatusCode::OK, Version::HTTP_10));
    assert!(String::from_utf8_lossy(&answer.body).contains("s_server"), "the status page, read to the close");

    // Under the public roots the test CA is unknown: the handshake fails, and says why.
    let error = fails(&client(), get()).await;
    assert!(error.starts_with("TLS handshake failed: ") && error.contains("UnknownIssuer"), "{error}");
}

/// A child process, killed when the test ends, passed or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
