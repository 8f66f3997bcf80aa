//! Connecting to the database: SQLite (the embedded default) or Postgres.

pub mod bounds;
pub mod generation;
pub mod idempotency;
pub mod migrate;
pub mod outage;
pub mod page;

use std::time::Duration;

use anyhow::{Context, bail};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, Database, DatabaseConnection, DatabaseTransaction, DbErr,
    SqliteTransactionMode, TransactionOptions, TransactionTrait,
};

/// The embedded default: a SQLite file in the working directory, created on first use.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://loadout.db?mode=rwc";

/// Connections in a SQLite pool unless configured. WAL lets readers run beside the
/// one writer, and sqlx runs each SQLite connection on its own thread, so a few
/// connections overlap file I/O with work on 2 cores; more only add threads that
/// wait for the same write lock.
pub const DEFAULT_SQLITE_POOL: u32 = 4;
/// Connections in a Postgres pool unless configured: four per core on the 2-core
/// machines this runs on, so that ten replicas (each also holds one connection to
/// LISTEN on) fit under Postgres's default `max_connections = 100`.
pub const DEFAULT_POSTGRES_POOL: u32 = 8;
/// How long a SQLite statement waits for another connection's write lock before
/// it fails with "database is locked" (answered 503).
pub const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens a connection pool of the default size (see [`connect_with`]).
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    connect_with(url, None).await
}

/// Opens a connection pool, failing with one line that names the problem but never
/// the password. `pool_size` overrides [`DEFAULT_SQLITE_POOL`] / [`DEFAULT_POSTGRES_POOL`].
///
/// SQLite is set explicitly, whatever the file says: WAL (readers never wait for
/// the writer), `synchronous = NORMAL` (durable across a process crash; with WAL
/// only a power cut can lose the last commits), a busy timeout, and foreign keys on.
/// Connections are pinged only after 30 s idle, not on every acquire.
pub async fn connect_with(url: &str, pool_size: Option<u32>) -> anyhow::Result<DatabaseConnection> {
    let shown = redact(url);
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or("");
    let sqlite = match scheme {
        "sqlite" => true,
        "postgres" | "postgresql" => false,
        _ => {
            bail!("unsupported database URL {shown}: use sqlite://FILE or postgres://USER@HOST/DB")
        }
    };
    let default_size = if sqlite {
        DEFAULT_SQLITE_POOL
    } else {
        DEFAULT_POSTGRES_POOL
    };
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(pool_size.unwrap_or(default_size).max(1))
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire_if_idle_for(Duration::from_secs(30))
        // Statements can carry prompt bodies; never log them.
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(|o| {
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .foreign_keys(true)
        })
        .map_sqlx_sqlite_pool_opts(|o| o.after_release(keep_if_clean))
        .map_sqlx_postgres_pool_opts(|o| o.after_release(keep_if_clean))
        // A restart kills every pooled connection: once one is found dead, the idle
        // ones opened before it are replaced rather than each failing a request.
        .map_sqlx_postgres_before_acquire(|_, meta| {
            Box::pin(async move { Ok(outage::opened_since_last_loss(meta.age)) })
        });
    Database::connect(options)
        .await
        .map_err(|e| anyhow::anyhow!(redact_in(&e.to_string(), url)))
        .with_context(|| format!("cannot connect to database {shown}"))
}

/// Whether a connection handed back to the pool may serve again: only when no
/// transaction is counted open on it. A COMMIT that fails with SQLITE_FULL or an
/// I/O error makes SQLite roll back by itself; the rollback sqlx then sends fails,
/// and sqlx-sqlite still counts the transaction as open, so the next `begin` on that
/// connection would be a SAVEPOINT and every later "commit" a RELEASE inside a
/// transaction that is never committed: acknowledged writes lost, uncommitted rows
/// served. Such a connection is closed instead, and the pool opens a fresh one.
///
/// One atomic read, no round trip (sqlx pings on release anyway). A connection
/// whose dropped transaction's rollback is still queued is closed too: that is an
/// error path, and a fresh connection costs less than a wrong guess.
fn keep_if_clean<C: sea_orm::sqlx::Connection>(
    connection: &mut C,
    _: sea_orm::sqlx::pool::PoolConnectionMetadata,
) -> futures_util::future::BoxFuture<'_, Result<bool, sea_orm::sqlx::Error>> {
    let clean = !connection.is_in_transaction();
    if !clean {
        tracing::warn!("a database connection was left inside a transaction; closing it");
    }
    Box::pin(std::future::ready(Ok(clean)))
}

/// Begins a transaction that will write. On SQLite it is `BEGIN IMMEDIATE`: the
/// write lock is taken (waiting up to the busy timeout) before the first read, so a
/// transaction that reads first never fails with SQLITE_BUSY when it must upgrade.
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    let txn = db
        .begin_with_options(TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        })
        .await?;
    Ok(txn)
}

/// What a write is given by whoever asks for it: the database, the generation it
/// commits through, its time (read once from the caller's clock), and the
/// request's `Idempotency-Key`, recorded in the write's own transaction. The
/// state lends one per request (`AppState::writer`); the command line makes its own.
/// Opened as a guarded write by `registry::guard` (`Writer::begin`).
#[derive(Clone, Copy)]
pub struct Writer<'a> {
    pub db: &'a DatabaseConnection,
    pub generation: &'a crate::cache::Generation,
    pub now: chrono::DateTime<chrono::Utc>,
    pub key: Option<&'a idempotency::Pending>,
}

/// What a database error means to a caller, decided in one place so that no
/// driver text ever reaches a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbFailure {
    /// A unique key was taken by a concurrent write (a check-then-insert race).
    Taken,
    /// A row this write refers to was removed by a concurrent write.
    Gone,
    /// The database could not serve this now: a lock or connection wait timed out,
    /// or Postgres chose this transaction as a serialisation or deadlock victim.
    Busy,
    /// The database cannot write: its disk is full, or its storage failed
    /// (SQLITE_FULL, SQLITE_IOERR, Postgres `disk_full`). Nothing was saved.
    Storage,
    /// The database did not answer: a connection was killed or reset (a restart),
    /// or none could be had in time (see [`outage::unreachable`]).
    Down,
    /// Anything else: a bug, logged and answered 500.
    Other,
}

/// Tries a real write (a row rewritten with its own value, committed), so `/ready`
/// knows whether the database can write (a full disk leaves reads working).
pub async fn probe_write(db: &DatabaseConnection) -> Result<(), DbErr> {
    use sea_orm::ConnectionTrait;
    let write = begin_write(db).await?;
    write
        .execute_unprepared("UPDATE loadout_state SET generation = generation")
        .await?;
    write.commit().await
}

/// Classifies a database error (SQLite and Postgres codes alike).
pub fn classify(error: &sea_orm::DbErr) -> DbFailure {
    use sea_orm::{ConnAcquireErr, DbErr, RuntimeErr, SqlErr};
    if matches!(error, DbErr::RecordNotInserted) {
        // An idempotency key a concurrent request holds (`idempotency::record`).
        return DbFailure::Taken;
    }
    match error.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => return DbFailure::Taken,
        Some(SqlErr::ForeignKeyConstraintViolation(_)) => return DbFailure::Gone,
        _ => {}
    }
    if outage::unreachable(error) {
        return DbFailure::Down;
    }
    match error {
        DbErr::ConnectionAcquire(ConnAcquireErr::Timeout) => DbFailure::Busy,
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            match e.as_database_error().and_then(|d| d.code()).as_deref() {
                // SQLITE_BUSY, SQLITE_LOCKED and their extended codes (low byte 5 or 6).
                Some(code) if code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6)) => {
                    DbFailure::Busy
                }
                // SQLITE_IOERR (and its extended codes), SQLITE_FULL; Postgres disk_full.
                Some(code)
                    if code
                        .parse::<u32>()
                        .is_ok_and(|c| matches!(c & 0xff, 10 | 13))
                        || code == "53100" =>
                {
                    DbFailure::Storage
                }
                // serialization_failure, deadlock_detected, lock_not_available.
                Some("40001" | "40P01" | "55P03") => DbFailure::Busy,
                _ => DbFailure::Other,
            }
        }
        _ => DbFailure::Other,
    }
}

/// `scheme://user:secret@host/db` → `scheme://user:***@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Removes the password from a driver message that might echo the URL.
fn redact_in(message: &str, url: &str) -> String {
    let redacted = redact(url);
    if redacted == url {
        message.to_owned()
    } else {
        message.replace(url, &redacted)
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_in_a_url_is_replaced() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/loadout"),
            "postgres://app:***@db:5432/loadout"
        );
    }

    #[test]
    fn a_url_without_a_password_is_unchanged() {
        assert_eq!(
            redact("postgres://app@db/loadout"),
            "postgres://app@db/loadout"
        );
        assert_eq!(
            redact("sqlite://loadout.db?mode=rwc"),
            "sqlite://loadout.db?mode=rwc"
        );
    }

    #[test]
    fn an_at_sign_in_the_password_does_not_leak_its_tail() {
        assert_eq!(
            redact("postgres://app:p@ss@db/x"),
            "postgres://app:***@db/x"
        );
    }
}
