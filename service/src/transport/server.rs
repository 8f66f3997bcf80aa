//! The connection loop: hyper's HTTP/1 server with the limits that keep bad clients
//! from hurting everyone else. `axum::serve` has none of them.
//!
//! - **Header-read timeout**: a client has this long to send a whole request head,
//!   counted from the moment the connection waits for one (so it is also how long
//!   an idle keep-alive connection stays open).
//! - **Idle timeout**: no byte moved in either direction for this long closes the
//!   connection: a stalled upload, or a client that stopped reading its response.
//!   It is longer than any request may legitimately take (connector calls are
//!   capped at 30 s). Reads and writes only note the time on a coarse clock (one
//!   atomic store); one timer per connection checks the note, because a timer
//!   reset per read or write cost a fifth of the cached fetch's throughput.
//!   A trickled body cannot keep resetting it for ever: the body has its own
//!   deadline and minimum rate ([`super::deadline`]).
//! - **Connection limit**: at most this many connections at once; the next one
//!   waits in the kernel's accept queue until one closes.
//! - **Connections per client address** ([`super::limits::Connections`]), well
//!   below the global limit, so one address cannot hold every slot: a connection
//!   over it is closed at once, unread and unanswered. A 429 was the alternative,
//!   but answering means reading a request head on a connection we do not want,
//!   for a client that already holds dozens of them; closing costs nothing.
//!   Trusted proxies (`--trusted-proxy`) are counted only against the global limit.
//!
//! On shutdown the loop stops accepting, in-flight requests finish (up to
//! [`DRAIN`]), then it returns.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::deadline::{BodyLimits, Deadline};
use super::limits::{Connections, Slot};
use crate::web::{Peer, serving};

/// How long in-flight requests may take to finish after a shutdown signal.
pub const DRAIN: Duration = Duration::from_secs(30);

/// The connection limits (`serve --header-timeout-ms`, `--idle-timeout-secs`,
/// `--max-connections`, `--max-connections-per-address`, `--body-timeout-secs`,
/// `--body-min-rate`, `--trusted-proxy`).
#[derive(Clone, Debug)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    /// Connections one client address may hold at once.
    pub max_connections_per_address: usize,
    /// The request body's deadline and minimum rate.
    pub body: BodyLimits,
    /// Proxies counted only against `max_connections`, whose `X-Forwarded-For`
    /// names the client.
    pub trusted_proxies: Vec<IpAddr>,
}

impl From<&crate::app::settings::Connections> for Limits {
    fn from(flags: &crate::app::settings::Connections) -> Self {
        Self {
            header_read_timeout: Duration::from_millis(flags.header_timeout_ms),
            idle_timeout: Duration::from_secs(flags.idle_timeout_secs),
            max_connections: usize::try_from(flags.max_connections).unwrap_or(usize::MAX),
            max_connections_per_address: usize::try_from(flags.max_connections_per_address)
                .unwrap_or(usize::MAX),
            body: BodyLimits {
                timeout: Duration::from_secs(flags.body_timeout_secs),
                min_rate: flags.body_min_rate,
                grace: super::deadline::GRACE,
            },
            trusted_proxies: flags.trusted_proxies.clone(),
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
    let per_address = Connections::new(limits.max_connections_per_address);
    let graceful = GracefulShutdown::new();
    let service = Deadlined {
        router,
        body: limits.body,
    };
    let ticker = tokio::spawn(tick());
    tokio::pin!(shutdown);
    while let Some((stream, from, permit)) =
        next_connection(&listener, &permits, &mut shutdown).await
    {
        let Some((peer, slot)) = admit(&limits, &per_address, from.ip()) else {
            continue;
        };
        stream.set_nodelay(true).ok();
        let (stream, last_active) = IdleTimeout::new(stream);
        let connection =
            graceful.watch(http.serve_connection(TokioIo::new(stream), service.clone()));
        let idle = idle_watch(last_active, limits.idle_timeout);
        tokio::spawn(serving(peer, watched(connection, idle, (slot, permit))));
    }
    drop(listener);
    drain(graceful).await;
    ticker.abort();
    Ok(())
}

/// One connection until it ends or goes idle; then `held` (its places under the
/// limits) is given back.
async fn watched<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    idle: impl Future<Output = ()>,
    held: impl Sized,
) {
    tokio::select! {
        // Errors here are the client's (reset, timeout, malformed head): not ours to log loudly.
        served = connection => if let Err(e) = served {
            tracing::debug!(error = %e, "connection closed with an error");
        },
        () = idle => tracing::debug!("closed an idle connection"),
    }
    drop(held);
}

/// Lets open connections finish their requests, for at most [`DRAIN`].
async fn drain(graceful: GracefulShutdown) {
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "some connections were still open {} s after shutdown",
            DRAIN.as_secs()
        );
    }
}

/// A new connection's peer and its place in its address's count (none for a trusted
/// proxy); `None` when its address holds the most it may: the caller drops it unread.
fn admit(
    limits: &Limits,
    per_address: &Arc<Connections>,
    ip: IpAddr,
) -> Option<(Peer, Option<Slot>)> {
    let proxy = limits.trusted_proxies.contains(&ip);
    if proxy {
        return Some((Peer { ip, proxy }, None));
    }
    match per_address.take(ip) {
        Some(slot) => Some((Peer { ip, proxy }, Some(slot))),
        None => {
            tracing::debug!(peer = %ip, "closed a connection: its address holds the most it may");
            None
        }
    }
}

/// The router as hyper calls it: each request's body under [`Deadline`].
#[derive(Clone)]
struct Deadlined {
    router: Router,
    body: BodyLimits,
}

impl hyper::service::Service<Request<Incoming>> for Deadlined {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = axum::routing::future::RouteFuture<Infallible>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let request = request.map(|body| Deadline::new(body, self.body));
        tower::Service::call(&mut self.router.clone(), request)
    }
}

/// Waits for a free connection slot, then for a connection; `None` once `shutdown` resolves.
async fn next_connection(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    shutdown: &mut Pin<&mut impl Future<Output = ()>>,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let permit = tokio::select! {
        permit = permits.clone().acquire_owned() => permit.ok()?,
        () = shutdown.as_mut() => return None,
    };
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => return Some((stream, peer, permit)),
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

/// Seconds since the serving loop started, as a coarse clock every connection can
/// read and write with one atomic operation: no clock is read and no timer touched
/// per read or write. [`tick`] advances it once a second.
static NOW: AtomicU64 = AtomicU64::new(0);

fn coarse_now() -> u64 {
    NOW.load(Ordering::Relaxed)
}

/// Advances [`NOW`] once a second, for as long as the server runs.
async fn tick() {
    let start = tokio::time::Instant::now();
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        NOW.store(start.elapsed().as_secs(), Ordering::Relaxed);
    }
}

/// A stream that notes when a byte last moved; [`idle_watch`] reads the note.
struct IdleTimeout<S> {
    inner: S,
    last_active: Arc<AtomicU64>,
}

impl<S> IdleTimeout<S> {
    fn new(inner: S) -> (Self, Arc<AtomicU64>) {
        let last_active = Arc::new(AtomicU64::new(coarse_now()));
        let stream = Self {
            inner,
            last_active: last_active.clone(),
        };
        (stream, last_active)
    }

    fn note<T>(&self, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.last_active.store(coarse_now(), Ordering::Relaxed);
        }
        polled
    }
}

/// Resolves once no byte has moved for `limit`: one timer per connection, checked
/// every quarter of the limit (so a connection is closed within 1¼ × `limit`).
async fn idle_watch(last_active: Arc<AtomicU64>, limit: Duration) {
    let period = (limit / 4).max(Duration::from_millis(250));
    loop {
        tokio::time::sleep(period).await;
        let idle = coarse_now().saturating_sub(last_active.load(Ordering::Relaxed));
        if idle >= limit.as_secs().max(1) {
            return;
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
        self.note(polled)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.note(polled)
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
        self.note(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
