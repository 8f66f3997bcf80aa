//! Limits per client address: whose request this is, how many connections one
//! address holds, and how many failed authentications it may make.
//!
//! - **The client address** is the connection's peer, never a header, unless the
//!   peer is a trusted proxy (`serve --trusted-proxy`): then it is the last address
//!   in `X-Forwarded-For`, the one that proxy appended. IPv6 addresses count by
//!   their /64, a single client's usual allocation. The accept loop runs each
//!   connection inside [`serving`], so code on the request path reads its peer
//!   without it being passed through every layer, and a request pays nothing for it
//!   unless it asks. Requests served without the accept loop (tests calling the
//!   router in process) have no peer, and no per-address limit applies to them.
//! - **Connections per address** ([`Connections`]): one count per address with open
//!   connections, taken when a connection is accepted and given back when it
//!   closes; never touched per request.
//! - **Failed authentications** ([`Failures`]): a presented key that is unknown,
//!   revoked or malformed is a failure; a burst of `per_minute` is allowed, then one
//!   every `60 / per_minute` s (GCRA: one atomic per address holding when its next
//!   failure is due). A limited address is answered 429 `too_many_failures` with
//!   `Retry-After` *before* its key is looked up, so random tokens stop costing a
//!   query each. A key already in the cache is never refused: it is valid, and
//!   costs no query. The map is bounded (moka, [`MAX_TRACKED`] addresses, idle
//!   ones forgotten), so memory does not grow with the addresses a client uses.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue};

use crate::error::{Error, Kind};

pub use crate::auth::failures::{
    DEFAULT_FAILURES_PER_MINUTE, Failures, MAX_TRACKED, TOO_MANY_FAILURES, too_many,
};

/// The other end of the connection a request came on.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub ip: IpAddr,
    /// A trusted proxy (`--trusted-proxy`): its `X-Forwarded-For` names the client.
    pub proxy: bool,
}

tokio::task_local! {
    static PEER: Peer;
}

/// Runs `connection` (one connection's whole life) with `peer` as its peer.
pub fn serving<F: Future>(peer: Peer, connection: F) -> impl Future<Output = F::Output> {
    PEER.scope(peer, connection)
}

/// The address limits count: IPv4 as is (an IPv4-mapped IPv6 address too), IPv6 by /64.
pub fn counted(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

/// The client address of the request being served (see the module's notes);
/// `None` outside the accept loop.
pub fn client(headers: &HeaderMap) -> Option<IpAddr> {
    let peer = PEER.try_with(|peer| *peer).ok()?;
    let forwarded = || {
        let last = headers.get_all("x-forwarded-for").iter().next_back()?;
        last.to_str().ok()?.rsplit(',').next()?.trim().parse().ok()
    };
    let ip = match peer.proxy {
        true => forwarded().unwrap_or(peer.ip),
        false => peer.ip,
    };
    Some(counted(ip))
}

/// Open connections per client address (trusted proxies are not counted).
pub struct Connections {
    open: Mutex<HashMap<IpAddr, usize>>,
    max: usize,
}

/// One open connection's place in its address's count, given back on drop.
pub struct Slot {
    connections: Arc<Connections>,
    ip: IpAddr,
}

impl Connections {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            open: Mutex::new(HashMap::new()),
            max: max.max(1),
        })
    }

    /// A slot for a new connection from `ip`; `None` when its address holds the most.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let ip = counted(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(ip).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Slot {
            connections: self.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .connections
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The `Retry-After` of a 429 made by [`too_many`].
pub fn retry_after(error: &Error) -> Option<HeaderValue> {
    if error.kind != Kind::TooManyRequests {
        return None;
    }
    let seconds = error.details.get("retry_after_seconds")?.as_u64()?;
    Some(HeaderValue::from(seconds))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use sea_orm::DbErr;

    use super::*;

    #[tokio::test]
    async fn a_limited_address_is_refused_before_its_lookup_runs() {
        let failures = Failures::new(1);
        let peer = Peer {
            ip: "192.0.2.3".parse().expect("ip"),
            proxy: false,
        };
        let headers = HeaderMap::new();
        let lookups = std::sync::atomic::AtomicUsize::new(0);
        let lookup = || async {
            lookups.fetch_add(1, Ordering::Relaxed);
            Ok::<Option<()>, DbErr>(None)
        };
        serving(peer, async {
            assert!(matches!(
                failures.guard(client(&headers), lookup()).await,
                Ok(None)
            ));
            let refused = failures.guard(client(&headers), lookup()).await.err();
            assert_eq!(refused.map(|e| e.code), Some(TOO_MANY_FAILURES));
        })
        .await;
        assert_eq!(
            lookups.load(Ordering::Relaxed),
            1,
            "the second lookup never ran"
        );
    }

    #[tokio::test]
    async fn a_trusted_proxy_names_the_client_in_x_forwarded_for() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("10.0.0.9, 198.51.100.7"),
        );
        let proxy = Peer {
            ip: "127.0.0.1".parse().expect("ip"),
            proxy: true,
        };
        let direct = Peer {
            proxy: false,
            ..proxy
        };
        let seen = serving(proxy, async { client(&headers) }).await;
        assert_eq!(seen, "198.51.100.7".parse().ok());
        let seen = serving(direct, async { client(&headers) }).await;
        assert_eq!(
            seen,
            "127.0.0.1".parse().ok(),
            "anyone else's header is ignored"
        );
        assert_eq!(client(&headers), None, "no connection, no address");
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().expect("ip");
        assert_eq!(counted(a), counted(b));
        let mapped: IpAddr = "::ffff:192.0.2.4".parse().expect("ip");
        assert_eq!(counted(mapped), "192.0.2.4".parse::<IpAddr>().expect("ip"));
    }

    #[test]
    fn an_address_holds_at_most_its_connections_and_gets_them_back() {
        let connections = Connections::new(2);
        let ip: IpAddr = "192.0.2.5".parse().expect("ip");
        let (first, _second) = (connections.take(ip), connections.take(ip));
        assert!(first.is_some() && connections.take(ip).is_none());
        assert!(connections.take("192.0.2.6".parse().expect("ip")).is_some());
        drop(first);
        assert!(connections.take(ip).is_some());
    }
}
