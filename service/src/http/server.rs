//! The connection loop: hyper's HTTP/1 server with the limits that keep bad clients
//! from hurting everyone else. `axum::serve` has none of them.
//!
//! - **Header-read timeout**: a client has this long to send a whole request head,
//!   counted from the moment the connection waits for one (so it is also how long
//!   an idle keep-alive connection stays open).
//! - **Idle timeout**: no byte moved in either direction for this long closes the
//!   connection: a stalled upload, or a client that stopped reading its response.
//!   It is longer than any request may legitimately take (connector calls are
//!   capped at 30 s).
//! - **Connection limit**: at most this many connections at once; the next one
//!   waits in the kernel's accept queue until one closes.
//!
//! On shutdown the loop stops accepting, in-flight requests finish (up to
//! [`DRAIN`]), then it returns.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// How long in-flight requests may take to finish after a shutdown signal.
pub const DRAIN: Duration = Duration::from_secs(30);

/// The connection limits (`serve --header-timeout-ms`, `--idle-timeout-secs`, `--max-connections`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let service = TowerToHyperService::new(router);
    tokio::pin!(shutdown);
    while let Some((stream, permit)) = next_connection(&listener, &permits, &mut shutdown).await {
        stream.set_nodelay(true).ok();
        let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
        let connection = graceful.watch(http.serve_connection(io, service.clone()));
        tokio::spawn(async move {
            // Errors here are the client's (reset, timeout, malformed head): not ours to log loudly.
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "some connections were still open {} s after shutdown",
            DRAIN.as_secs()
        );
    }
    Ok(())
}

/// Waits for a free connection slot, then for a connection; `None` once `shutdown` resolves.
async fn next_connection(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    shutdown: &mut Pin<&mut impl Future<Output = ()>>,
) -> Option<(TcpStream, OwnedSemaphorePermit)> {
    let permit = tokio::select! {
        permit = permits.clone().acquire_owned() => permit.ok()?,
        () = shutdown.as_mut() => return None,
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => return Some((stream, permit)),
                Err(e) => {
                    // Out of file descriptors and the like: say so, breathe, go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = shutdown.as_mut() => return None,
        }
    }
}

/// A stream that fails with `TimedOut` once no byte has moved for `limit`.
struct IdleTimeout<S> {
    inner: S,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<S> IdleTimeout<S> {
    fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
        }
    }

    /// After an operation: progress moves the deadline; waiting checks it.
    fn check<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                let next = Instant::now() + self.limit;
                self.deadline.as_mut().reset(next);
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection was idle too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.check(cx, polled)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
