//! A deadline for the whole request body and a minimum rate, so a client cannot
//! hold a connection by trickling a body: the idle timer restarts on every byte,
//! and the header-read timeout ends with the head.
//!
//! The accept loop wraps each request's body in [`Deadline`] before the router
//! sees it. The body must be complete within `timeout` of its head, and after a
//! grace period ([`GRACE`]) it must keep up with `min_rate` bytes a second on average; a body that
//! falls behind ends with an error, which the extractor reading it answers (400, a
//! console page), and hyper closes the connection since the body was not read to
//! its end. tower-http's `TimeoutBody` was not enough: its timeout is between two
//! frames, so a byte every few seconds resets it for ever.
//!
//! Cost: a body already complete with its head (every GET) gets no clock read and
//! no timer; a body that has to be waited for gets one timer, made the first time
//! it is waited for and moved only when the time it is due has moved.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// How long a body may take before the minimum rate applies, unless configured.
pub const GRACE: Duration = Duration::from_secs(5);

/// The limits on a request body (`serve --body-timeout-secs`, `--body-min-rate`).
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// The whole body must arrive within this, counted from its head.
    pub timeout: Duration,
    /// Bytes a second the body must average after `grace`; 0 for none.
    pub min_rate: u64,
    /// How long the body may take before the minimum rate applies ([`GRACE`]).
    pub grace: Duration,
}

/// A request body with a deadline (see the module's notes).
pub struct Deadline<B> {
    inner: B,
    limits: BodyLimits,
    /// When the head arrived; `None` for a body that was complete with it.
    started: Option<Instant>,
    received: u64,
    timer: Option<Pin<Box<Sleep>>>,
    /// Set once the body fell behind: every later poll says so again.
    late: Option<TooSlow>,
}

impl<B: Body> Deadline<B> {
    pub fn new(inner: B, limits: BodyLimits) -> Self {
        let started = (!inner.is_end_stream()).then(Instant::now);
        Self {
            inner,
            limits,
            started,
            received: 0,
            timer: None,
            late: None,
        }
    }
}

impl<B> Deadline<B> {
    /// When the body falls behind, given what has arrived, and why then.
    fn due(&self, started: Instant) -> (Instant, TooSlow) {
        let overall = started.checked_add(self.limits.timeout);
        let overall = (
            overall.unwrap_or(started),
            TooSlow::Timeout(self.limits.timeout),
        );
        if self.limits.min_rate == 0 {
            return overall;
        }
        let earned = self.received.saturating_mul(1000) / self.limits.min_rate;
        let slow = started
            .checked_add(self.limits.grace)
            .and_then(|t| t.checked_add(Duration::from_millis(earned)));
        match slow {
            Some(slow) if slow < overall.0 => (slow, TooSlow::Rate(self.limits.min_rate)),
            _ => overall,
        }
    }
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(late) = this.late {
            return Poll::Ready(Some(Err(late.into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received = this.received.saturating_add(data.len() as u64);
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        let Some(started) = this.started else {
            return Poll::Pending;
        };
        let (due, why) = this.due(started);
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        if timer.deadline() != due {
            timer.as_mut().reset(due);
        }
        match timer.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                this.late = Some(why);
                Poll::Ready(Some(Err(why.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.late.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a body read that failed says, when it failed because [`Deadline`] cut it
/// (through any wrapping: axum's `Body`, a length limit).
pub fn cut(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut error = Some(error);
    while let Some(e) = error {
        if let Some(slow) = e.downcast_ref::<TooSlow>() {
            return Some(slow.to_string());
        }
        error = e.source();
    }
    None
}

/// Why a body was cut.
#[derive(Clone, Copy, Debug)]
enum TooSlow {
    Timeout(Duration),
    Rate(u64),
}

impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooSlow::Timeout(limit) => write!(
                f,
                "the request body did not arrive within {} s",
                limit.as_secs()
            ),
            TooSlow::Rate(rate) => write!(
                f,
                "the request body arrived slower than {rate} bytes a second"
            ),
        }
    }
}

impl std::error::Error for TooSlow {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that sends `chunks` one at a time, each after `every`, then ends.
    struct Trickle {
        chunks: usize,
        every: Duration,
        next: Pin<Box<Sleep>>,
    }

    impl Body for Trickle {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.chunks == 0 {
                return Poll::Ready(None);
            }
            std::task::ready!(self.next.as_mut().poll(cx));
            self.chunks -= 1;
            let every = self.every;
            self.next.as_mut().reset(Instant::now() + every);
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
        }
    }

    async fn read(chunks: usize, every: Duration, limits: BodyLimits) -> Result<u64, String> {
        let body = Trickle {
            chunks,
            every,
            next: Box::pin(tokio::time::sleep(every)),
        };
        let mut body = std::pin::pin!(Deadline::new(body, limits));
        let mut read = 0;
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| e.to_string())?;
            read += frame.data_ref().map_or(0, |d| d.len() as u64);
        }
        Ok(read)
    }

    fn limits(timeout_ms: u64, min_rate: u64, grace_ms: u64) -> BodyLimits {
        BodyLimits {
            timeout: Duration::from_millis(timeout_ms),
            min_rate,
            grace: Duration::from_millis(grace_ms),
        }
    }

    #[tokio::test]
    async fn a_cut_body_is_told_apart_from_one_over_a_limit() {
        let trickle = Trickle {
            chunks: 1000,
            every: Duration::from_millis(100),
            next: Box::pin(tokio::time::sleep(Duration::from_millis(100))),
        };
        let slow = axum::body::Body::new(Deadline::new(trickle, limits(30_000, 1024, 100)));
        let error = axum::body::to_bytes(slow, 1024).await.expect_err("cut");
        assert!(cut(&error).is_some_and(|why| why.contains("slower than")));
        let large = axum::body::Body::from(vec![0u8; 2048]);
        let error = axum::body::to_bytes(large, 1024)
            .await
            .expect_err("over the limit");
        assert_eq!(cut(&error), None);
    }

    #[tokio::test]
    async fn a_body_that_keeps_up_is_read_whole() {
        let read = read(20, Duration::from_millis(20), limits(30_000, 1, 100)).await;
        assert_eq!(read, Ok(20));
    }

    #[tokio::test]
    async fn a_trickle_below_the_rate_is_cut_after_the_grace_period() {
        let cut = read(1000, Duration::from_millis(100), limits(30_000, 1024, 200)).await;
        assert_eq!(
            cut.err().as_deref(),
            Some("the request body arrived slower than 1024 bytes a second")
        );
    }

    #[tokio::test]
    async fn a_trickle_that_keeps_the_rate_is_cut_at_the_overall_deadline() {
        let cut = read(1000, Duration::from_millis(50), limits(1000, 1, 100)).await;
        assert_eq!(
            cut.err().as_deref(),
            Some("the request body did not arrive within 1 s")
        );
    }
}
