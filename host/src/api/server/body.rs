//! A request body with a deadline for the whole of it.
//!
//! hyper's header-read timeout ends a client that drips its request head; nothing in hyper or
//! axum bounds the body. tower-http's `TimeoutBody` restarts its clock at every frame, so a
//! client sending one byte every few seconds never trips it. This body is given one deadline
//! when its request arrives: a body not read in full by then fails with [`BodyDeadlineExceeded`],
//! which the API answers `408 REQUEST_TIMEOUT`, and hyper closes the connection.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The body was not received in full within `TE_BODY_READ_TIMEOUT_SEC`.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not received within {0:?}")]
pub struct BodyDeadlineExceeded(pub Duration);

/// `inner`, failing once `limit` has passed since it was made.
pub struct DeadlineBody<B> {
    inner: B,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<B> DeadlineBody<B> {
    pub fn new(inner: B, limit: Duration) -> Self {
        Self { inner, limit, deadline: Box::pin(tokio::time::sleep_until(Instant::now() + limit)) }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // The body first: a body already here is taken even at the deadline.
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyDeadlineExceeded(self.limit)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` (an extractor's rejection or anything in its source chain) is a body that
/// missed its deadline.
pub fn is_deadline(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error.is::<BodyDeadlineExceeded>() {
            return true;
        }
        next = error.source();
    }
    false
}

/// Box `inner` with a deadline into axum's body type.
pub fn with_deadline<B>(inner: B, limit: Duration) -> axum::body::Body
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    axum::body::Body::new(DeadlineBody::new(inner, limit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    #[tokio::test]
    async fn a_body_dripped_past_its_deadline_fails_even_though_bytes_keep_coming() {
        // A byte every 20 ms: each gap is far shorter than the 300 ms limit, the whole is not.
        let drip = futures_util::stream::unfold(0u8, |n| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Some((Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"x"))), n.wrapping_add(1)))
        });
        let body = DeadlineBody::new(StreamBody::new(Box::pin(drip)), Duration::from_millis(300));
        let started = Instant::now();
        let error = body.collect().await.expect_err("the deadline ends the body");
        assert!(is_deadline(&*error), "{error}");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_body_in_time_is_read_whole() {
        let body = DeadlineBody::new(http_body_util::Full::new(Bytes::from_static(b"{}")), Duration::from_secs(1));
        assert_eq!(body.collect().await.unwrap().to_bytes(), Bytes::from_static(b"{}"));
    }
}
