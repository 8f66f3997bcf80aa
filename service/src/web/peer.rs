//! The client address: the connection's peer, never a header, unless the peer is a
//! trusted proxy (`serve --trusted-proxy`): then it is the last address in
//! `X-Forwarded-For`, the one that proxy appended. IPv6 addresses count by their
//! /64, a single client's usual allocation. The accept loop (`transport::server`) runs
//! each connection inside [`serving`], so code on the request path reads its peer
//! without it being passed through every layer, and a request pays nothing for it
//! unless it asks. Requests served without the accept loop (tests calling the
//! router in process) have no peer, and no per-address limit applies to them.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::HeaderMap;

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

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

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
}
