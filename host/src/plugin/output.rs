//! A plugin call's stdout or stderr, captured for its attempt's logs: up to a bound per call,
//! the rest counted and let go. A plugin that writes more loses the excess, not its call (a
//! stream reported closed would make Rust's `println!` panic). Taken after every call, so the
//! next call of a reused instance starts with an empty capture.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// The most a single write may carry (wasi:io's write permit); a longer write is split by the
/// guest's own library.
const WRITE_PERMIT: usize = 64 * 1024;

/// One stream's capture, shared by the streams the guest opens on it.
#[derive(Clone)]
pub struct OutputCapture {
    captured: Arc<Mutex<Captured>>,
    capacity: usize,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    /// Bytes written past the capacity since the last take.
    dropped: u64,
}

impl OutputCapture {
    pub fn new(capacity: usize) -> Self {
        Self { captured: Arc::default(), capacity }
    }

    fn append(&self, bytes: &[u8]) {
        let mut captured = self.captured.lock().expect("output capture lock");
        let kept = self.capacity.saturating_sub(captured.bytes.len()).min(bytes.len());
        captured.bytes.extend_from_slice(&bytes[..kept]);
        captured.dropped += (bytes.len() - kept) as u64;
    }

    /// What was written since the last take, and how many bytes past the capacity were let go.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut captured = self.captured.lock().expect("output capture lock");
        (std::mem::take(&mut captured.bytes), std::mem::take(&mut captured.dropped))
    }
}

impl OutputStream for OutputCapture {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[async_trait::async_trait]
impl Pollable for OutputCapture {
    async fn ready(&mut self) {}
}

impl AsyncWrite for OutputCapture {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for OutputCapture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputCapture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_past_the_capacity_are_counted_and_let_go_and_a_take_starts_afresh() {
        let mut capture = OutputCapture::new(10);
        assert_eq!(capture.check_write().unwrap(), WRITE_PERMIT);
        capture.write(Bytes::from_static(b"hello ")).unwrap();
        capture.write(Bytes::from_static(b"world, again")).unwrap();
        assert_eq!(capture.check_write().unwrap(), WRITE_PERMIT, "a full capture still accepts writes");
        assert_eq!(capture.take(), (b"hello worl".to_vec(), 8));
        capture.write(Bytes::from_static(b"next")).unwrap();
        assert_eq!(capture.take(), (b"next".to_vec(), 0));
    }
}
