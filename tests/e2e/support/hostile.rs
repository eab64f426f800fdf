//! A hostile HTTP receiver on 127.0.0.1, written on raw TCP so it can break the protocol the
//! ways a bad peer does. The request's path picks the misbehaviour:
//!
//! - `/drip`: a 200 with `Content-Length: 1000`, then one byte a second;
//! - `/endless`: a 200 with a chunked body that never ends;
//! - `/reset`: a 200's headers, then the connection reset (RST) mid-body;
//! - `/big`: a 200 with a 10 MB body;
//! - `/many-headers`: a 200 with 1,000 headers;
//! - `/bad-utf8`: a 200 whose body and a header value are not UTF-8 and hold NUL bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone)]
pub struct HostileReceiver {
    pub base_url: String,
    requests: Arc<Mutex<HashMap<String, usize>>>,
}

impl HostileReceiver {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(HashMap::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, seen).await;
                });
            }
        });
        Self { base_url, requests }
    }

    /// How many requests for `path` arrived.
    pub fn count(&self, path: &str) -> usize {
        self.requests.lock().unwrap().get(path).copied().unwrap_or(0)
    }
}

/// Read one request's head and answer it the way its path says; the connection is never
/// reused.
async fn serve(mut stream: TcpStream, seen: Arc<Mutex<HashMap<String, usize>>>) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() > 64 * 1024 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let path = String::from_utf8_lossy(&head).split_whitespace().nth(1).unwrap_or("/").to_owned();
    *seen.lock().unwrap().entry(path.clone()).or_default() += 1;
    match path.as_str() {
        "/drip" => {
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n").await?;
            for _ in 0..1000 {
                stream.write_all(b"x").await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        "/endless" => {
            stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
            let chunk = format!("{:x}\r\n{}\r\n", 8192, "y".repeat(8192));
            // Until the client hangs up (a bound, so a broken client cannot keep this going).
            for _ in 0..1_000_000 {
                stream.write_all(chunk.as_bytes()).await?;
            }
        }
        "/reset" => {
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npartial").await?;
            stream.flush().await?;
            // SO_LINGER 0: close sends RST instead of FIN.
            stream.set_zero_linger()?;
            drop(stream);
            return Ok(());
        }
        "/big" => {
            let size = 10 * 1024 * 1024;
            stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n").as_bytes()).await?;
            let block = vec![b'z'; 64 * 1024];
            for _ in 0..size / block.len() {
                stream.write_all(&block).await?;
            }
        }
        "/many-headers" => {
            let mut answer = String::from("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n");
            for i in 0..1000 {
                answer.push_str(&format!("X-Header-{i}: {i}\r\n"));
            }
            answer.push_str("\r\nok");
            stream.write_all(answer.as_bytes()).await?;
        }
        "/bad-utf8" => {
            let body = b"bad \xff\xfe and \0 nul";
            let mut answer = b"HTTP/1.1 200 OK\r\nX-Odd: \xff\xfe\r\n".to_vec();
            answer.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            answer.extend_from_slice(body);
            stream.write_all(&answer).await?;
        }
        _ => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").await?,
    }
    stream.flush().await
}
