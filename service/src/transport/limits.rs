//! Limits per client address: how many connections one address holds, and how
//! many failed authentications it may make. Which address a request comes from is
//! [`crate::web::peer`]'s (the console reads it too).
//!
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
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::web::counted;

pub use crate::auth::failures::{
    DEFAULT_FAILURES_PER_MINUTE, Failures, MAX_TRACKED, TOO_MANY_FAILURES, too_many,
};

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

#[cfg(test)]
mod tests {

    use axum::http::HeaderMap;
    use sea_orm::DbErr;

    use super::*;
    use crate::web::{Peer, client, serving};

    #[tokio::test]
    async fn a_limited_address_is_refused_its_failures_but_never_its_good_keys() {
        let failures = Failures::new(1);
        let peer = Peer {
            ip: "192.0.2.3".parse().expect("ip"),
            proxy: false,
        };
        let headers = HeaderMap::new();
        let bad = || async { Ok::<Option<()>, DbErr>(None) };
        let good = || async { Ok::<Option<()>, DbErr>(Some(())) };
        serving(peer, async {
            assert!(matches!(
                failures.guard(client(&headers), bad()).await,
                Ok(None)
            ));
            let refused = failures.guard(client(&headers), bad()).await.err();
            assert_eq!(refused.map(|e| e.code), Some(TOO_MANY_FAILURES));
            assert!(
                matches!(failures.guard(client(&headers), good()).await, Ok(Some(()))),
                "a key that authenticates is answered from a limited address"
            );
        })
        .await;
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
