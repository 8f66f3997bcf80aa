//! While the database is away: which errors mean it did not answer, a read retried
//! once on a fresh connection, idle connections older than a lost one discarded, a
//! check that tells a database that takes no connection from a busy pool, and a
//! breaker that makes requests fail fast until a probe reaches the database again.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sea_orm::{ConnAcquireErr, DatabaseConnection, DbErr, RuntimeErr};

/// The error code of a request the database did not answer (503).
pub const CODE: &str = "unavailable";
/// How long a request may run while the breaker is open before it is answered 503:
/// a cached answer takes microseconds and a read from a database that is back a few
/// milliseconds, so this only cuts the requests that wait for a database that is not.
pub const FAIL_FAST: Duration = Duration::from_millis(200);
/// How long a request runs before the edge asks whether the database takes
/// connections ([`Breaker::reachable`]): a cached answer takes microseconds and a
/// database read milliseconds, so only requests that wait are asked about.
pub const SUSPECT_AFTER: Duration = Duration::from_millis(200);
/// How long one probe waits for the database before it tries again, and how long
/// [`Breaker::reachable`] waits for a new connection: [`SUSPECT_AFTER`] and this
/// answer a request within 1 s while the database is away.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a yes of [`Breaker::reachable`] serves the requests that ask meanwhile:
/// under load, a few connections a second, not one per waiting request.
const CHECK_FRESH: Duration = Duration::from_millis(500);
/// The pause between two failed probes.
const PROBE_PAUSE: Duration = Duration::from_millis(100);

/// Whether `error` means the database did not answer: the connection was lost (reset,
/// closed, a protocol error from a dead socket; Postgres `admin_shutdown`,
/// `crash_shutdown`, `cannot_connect_now`, a connection exception, the database gone)
/// or no connection could be had within the acquire timeout.
pub fn unreachable(error: &DbErr) -> bool {
    matches!(error, DbErr::ConnectionAcquire(ConnAcquireErr::Timeout)) || lost(error)
}

/// Whether `error` means a connection died under the statement, or the pool could not
/// open one: what a retry on a fresh connection can fix.
pub fn lost(error: &DbErr) -> bool {
    let sqlx = match error {
        DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed) => return true,
        DbErr::Conn(RuntimeErr::SqlxError(e))
        | DbErr::Exec(RuntimeErr::SqlxError(e))
        | DbErr::Query(RuntimeErr::SqlxError(e)) => e,
        _ => return false,
    };
    use sea_orm::sqlx::Error;
    match &**sqlx {
        Error::Io(_) | Error::Protocol(_) | Error::Tls(_) | Error::PoolClosed => true,
        Error::Database(e) => e.code().is_some_and(|code| {
            // admin_shutdown, crash_shutdown, cannot_connect_now, invalid_catalog_name
            // (the database was dropped), and every connection exception (class 08).
            matches!(&*code, "57P01" | "57P02" | "57P03" | "3D000") || code.starts_with("08")
        }),
        _ => false,
    }
}

/// When a connection was last found dead, in milliseconds since [`epoch`] (0: never).
/// One per process, like the pool it protects: a stale time only costs other pools a
/// reconnect.
static LOST_AT_MS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Notes that a connection was found dead: every idle connection opened before now is
/// discarded when next acquired ([`opened_since_last_loss`]), because a restart or a
/// reset kills them all, and each would otherwise fail one request.
pub fn note_lost() {
    let now = epoch().elapsed().as_millis().max(1);
    LOST_AT_MS.store(u64::try_from(now).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// The pools' `before_acquire`: keep an idle connection unless it was opened before
/// the last connection was found dead. Costs no round trip.
pub fn opened_since_last_loss(age: Duration) -> bool {
    let lost = LOST_AT_MS.load(Ordering::Relaxed);
    if lost == 0 {
        return true;
    }
    let now = epoch().elapsed();
    match now.checked_sub(age) {
        Some(opened) => opened.as_millis() > u128::from(lost),
        // Opened before the epoch, so before any loss.
        None => false,
    }
}

/// Runs a read, and runs it once more when its connection was lost (a killed or reset
/// connection from the pool; the retry gets a fresh one). Only for reads: a write whose
/// connection died may have committed, so it is never retried here. The retry may take
/// [`RETRY_WITHIN`]: a database that is restarting makes the pool wait for its acquire
/// timeout, and the 503 that opens the breaker should not wait that long.
pub async fn read_retrying<T, F, Fut>(mut read: F) -> Result<T, DbErr>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, DbErr>>,
{
    match read().await {
        Err(e) if lost(&e) => {
            tracing::warn!(error = %e, "a database connection was lost; retrying the read once");
            note_lost();
            tokio::time::timeout(RETRY_WITHIN, read())
                .await
                .unwrap_or(Err(DbErr::ConnectionAcquire(ConnAcquireErr::Timeout)))
        }
        other => other,
    }
}

/// How long the retry of a read may take.
pub const RETRY_WITHIN: Duration = Duration::from_secs(1);

/// After the database failed to answer, requests fail fast (see [`FAIL_FAST`]) instead
/// of each waiting the pool's 5 s acquire timeout, while one probe at a time tries the
/// database; the first probe that answers closes the breaker.
///
/// A request that waits finds out sooner: the pool retries a refused connection until
/// its acquire timeout (5 s), which is right for a pool that is only busy and wrong for
/// a database that is gone; [`Breaker::reachable`] tells the two apart with a connection
/// of its own.
#[derive(Clone, Default)]
pub struct Breaker {
    open: Arc<AtomicBool>,
    /// When the database last took a connection [`Breaker::reachable`] opened.
    reached: Arc<tokio::sync::Mutex<Option<Instant>>>,
}

impl Breaker {
    /// Whether the database takes a new connection now, on a connection of its own
    /// (never the pool's, which waits behind busy requests), within [`PROBE_TIMEOUT`];
    /// when it does not, the breaker opens. One check at a time: a yes serves the
    /// requests that ask within [`CHECK_FRESH`], and while the breaker is open the
    /// answer is no. SQLite is a file beside the process: it always is.
    pub async fn reachable(&self, db: &DatabaseConnection) -> bool {
        let mut reached = self.reached.lock().await;
        if self.is_open() {
            return false;
        }
        if reached.is_some_and(|at| at.elapsed() < CHECK_FRESH) {
            return true;
        }
        if takes_a_connection(db).await {
            *reached = Some(Instant::now());
            return true;
        }
        self.trip(db);
        false
    }

    /// Whether requests should fail fast now.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Opens the breaker after a request found the database unreachable, and starts
    /// the probe unless one runs already.
    pub fn trip(&self, db: &DatabaseConnection) {
        if self.open.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!("the database does not answer; failing fast until it does");
        tokio::spawn(probe(self.open.clone(), db.clone()));
    }
}

/// Opens a connection of its own to a Postgres database, and closes it: `false` when
/// the attempt failed as a lost connection does (refused, reset, the server shutting
/// down). Any other refusal (too many clients, a password) says the server answers,
/// and the pool's own connections may still serve; an attempt still waiting after
/// [`PROBE_TIMEOUT`] says nothing either way, and the request goes on waiting.
async fn takes_a_connection(db: &DatabaseConnection) -> bool {
    use sea_orm::sqlx::{ConnectOptions, Connection};
    if db.get_database_backend() != sea_orm::DbBackend::Postgres {
        return true;
    }
    let options = db.get_postgres_connection_pool().connect_options();
    match tokio::time::timeout(PROBE_TIMEOUT, options.connect()).await {
        Ok(Ok(connection)) => {
            tokio::spawn(connection.close());
            true
        }
        Ok(Err(e)) => {
            let error = DbErr::Conn(RuntimeErr::SqlxError(Arc::new(e)));
            let lost = lost(&error);
            if lost {
                tracing::warn!(error = %error, "the database takes no connection");
            }
            !lost
        }
        // Slow is not gone: a loaded server (or a busy machine) may take longer to
        // accept, and cutting its requests would turn load into an outage. A database
        // that drops packets is found by the pool's own timeout instead.
        Err(_) => {
            tracing::debug!("the database took no connection within {PROBE_TIMEOUT:?}");
            true
        }
    }
}

/// Pings the database until it answers, then closes the breaker. Stops when the pool
/// is closed (the process is shutting down).
async fn probe(open: Arc<AtomicBool>, db: DatabaseConnection) {
    loop {
        match tokio::time::timeout(PROBE_TIMEOUT, db.ping()).await {
            Ok(Ok(())) => {
                open.store(false, Ordering::Release);
                tracing::info!("the database answers again");
                return;
            }
            Ok(Err(DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed))) => return,
            Ok(Err(e)) if lost(&e) => note_lost(),
            _ => {}
        }
        tokio::time::sleep(PROBE_PAUSE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acquire_timeout_is_unreachable_but_not_a_lost_connection() {
        let timeout = DbErr::ConnectionAcquire(ConnAcquireErr::Timeout);
        assert!(unreachable(&timeout));
        assert!(!lost(&timeout));
    }

    #[test]
    fn an_io_error_is_a_lost_connection() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let error = DbErr::Query(RuntimeErr::SqlxError(Arc::new(reset.into())));
        assert!(lost(&error));
    }

    #[test]
    fn a_closed_pool_is_a_lost_connection() {
        assert!(lost(&DbErr::ConnectionAcquire(
            ConnAcquireErr::ConnectionClosed
        )));
        assert!(!lost(&DbErr::Custom("x".into())));
    }
}
