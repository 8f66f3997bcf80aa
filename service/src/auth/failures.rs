//! Failed authentications per client address: a presented key that is unknown,
//! revoked or malformed is a failure; a burst of `per_minute` is allowed, then one
//! every `60 / per_minute` s (GCRA: one atomic per address holding when its next
//! failure is due). The edge names the client address (`web::client`) and answers
//! the 429 with `Retry-After`; this keeps the counts. It lives with the keys it
//! guards, below the state that holds it (`AppState::auth_failures`).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sea_orm::DbErr;
use serde::Serialize;

use crate::error::{Error, Kind};

/// The error code of a 429 for too many failed authentications.
pub const TOO_MANY_FAILURES: &str = "too_many_failures";
/// Most addresses whose failures are remembered at once (about 100 bytes each).
pub const MAX_TRACKED: u64 = 65_536;
/// Failed authentications allowed per client address per minute, unless configured.
pub const DEFAULT_FAILURES_PER_MINUTE: u32 = 20;

/// Failed authentications per client address (see the module's notes); the same
/// count keyed otherwise (`Failures<i32>`: plans per key) limits other costly asks.
pub struct Failures<K = IpAddr> {
    /// Per address: when its next failure is due, in ms since `epoch` (GCRA's
    /// theoretical arrival time).
    due: moka::sync::Cache<K, Arc<AtomicU64>>,
    /// The sustained rate: one failure per this many ms.
    interval_ms: u64,
    /// How far ahead of now the due time may run: the burst, less one.
    tolerance_ms: u64,
    epoch: Instant,
}

/// The `details` of a 429: how long to wait.
#[derive(Serialize)]
struct Wait {
    retry_after_seconds: u64,
}

impl Default for Failures {
    fn default() -> Self {
        Self::new(DEFAULT_FAILURES_PER_MINUTE)
    }
}

impl<K: std::hash::Hash + Eq + Copy + Send + Sync + 'static> Failures<K> {
    /// A burst of `per_minute` failures per address, then one every `60 / per_minute` s.
    pub fn new(per_minute: u32) -> Self {
        let per_minute = u64::from(per_minute.max(1));
        let interval_ms = 60_000 / per_minute;
        Self {
            due: moka::sync::Cache::builder()
                .max_capacity(MAX_TRACKED)
                // An address idle this long owes nothing any more.
                .time_to_idle(Duration::from_secs(120))
                .build(),
            interval_ms,
            tolerance_ms: interval_ms * (per_minute - 1),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// `Err(seconds to wait)` when `client` has no failure left to make.
    pub fn check(&self, client: K) -> Result<(), u64> {
        let Some(due) = self.due.get(&client) else {
            return Ok(());
        };
        let (due, now) = (due.load(Ordering::Relaxed), self.now_ms());
        match due.checked_sub(now.saturating_add(self.tolerance_ms)) {
            Some(wait) if wait > 0 => Err(wait.div_ceil(1000)),
            _ => Ok(()),
        }
    }

    /// Notes one failed authentication from `client`.
    pub fn failed(&self, client: K) {
        let now = self.now_ms();
        let due = self.due.get_with(client, || Arc::new(AtomicU64::new(0)));
        let interval = self.interval_ms;
        due.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |due| {
            Some(due.max(now).saturating_add(interval))
        })
        .ok();
    }

    /// Takes one ask of `client` (a plan, say): `Err(seconds to wait)` when it
    /// has none left, and then nothing is counted.
    pub fn take(&self, client: K) -> Result<(), u64> {
        self.check(client)?;
        self.failed(client);
        Ok(())
    }

    /// Runs `lookup` (a key lookup) for a request from `client` (the edge's
    /// `web::client`; `None` when it has no address). A key that authenticates is
    /// always answered, whatever its address did before: only a lookup that finds
    /// no key counts, and only such a request is refused (429) once its address has
    /// no failure left. Agents behind one NAT or egress share an address, so a
    /// flood of bad tokens must not lock out their good keys. A malformed token
    /// never reaches the database (`keys::authenticate` refuses it first), so a
    /// limited address costs at most one indexed lookup per well-formed token.
    pub async fn guard<T>(
        &self,
        client: Option<K>,
        lookup: impl Future<Output = Result<Option<T>, DbErr>>,
    ) -> Result<Option<T>, Error> {
        let found = lookup.await?;
        if let (None, Some(client)) = (&found, client) {
            self.check(client).map_err(too_many)?;
            self.failed(client);
        }
        Ok(found)
    }
}

/// The 429 for an address out of failures; `Retry-After` is `seconds`.
pub fn too_many(seconds: u64) -> Error {
    Error::new(
        Kind::TooManyRequests,
        TOO_MANY_FAILURES,
        format!("too many failed authentications from this address; retry in {seconds} s"),
    )
    .with_details(Wait {
        retry_after_seconds: seconds,
    })
}

/// The 429 for a key out of `what` (`code`, say `too_many_plans`); `Retry-After`
/// is `seconds`.
pub fn too_many_asks(code: &'static str, what: &str, seconds: u64) -> Error {
    Error::new(
        Kind::TooManyRequests,
        code,
        format!("too many {what} from this key; retry in {seconds} s"),
    )
    .with_details(Wait {
        retry_after_seconds: seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_allowed_then_one_failure_per_interval() {
        let failures = Failures::new(3);
        let client: IpAddr = "192.0.2.1".parse().expect("ip");
        for _ in 0..3 {
            assert_eq!(failures.check(client), Ok(()));
            failures.failed(client);
        }
        assert_eq!(failures.check(client), Err(20), "one more every 20 s");
        let other: IpAddr = "192.0.2.2".parse().expect("ip");
        assert_eq!(failures.check(other), Ok(()), "per address");
    }
}
