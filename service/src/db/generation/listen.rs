//! Other processes' commits, pushed: a connection of its own `LISTEN`s on
//! [`CHANNEL`], where every [`bump`](super::bump) notifies its new generation on commit.
//!
//! Notifications sent while the connection is down are lost for good, so a caller
//! reads the generation itself whenever [`Listener::next`] answers [`Heard::Gap`].

use std::time::Duration;

use sea_orm::sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sea_orm::{DatabaseConnection, DbBackend};

use super::CHANNEL;

/// The listening connection's `application_name`, so that it can be found in
/// `pg_stat_activity` (by an operator, or by a test that kills it).
pub const APPLICATION_NAME: &str = "loadout-listen";

/// How long one attempt to (re)connect may wait for Postgres.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// What the listener heard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// A commit raised the generation to this.
    Generation(i64),
    /// Notifications may have been missed (the connection was lost and is listening
    /// again), or one could not be read: read the generation from the database.
    Gap,
}

/// A dedicated Postgres connection listening on [`CHANNEL`].
pub struct Listener(PgListener);

/// How to open the listening connection: the serving pool's own settings under
/// [`APPLICATION_NAME`]. `None` unless the database is Postgres.
pub fn options(db: &DatabaseConnection) -> Option<PgConnectOptions> {
    (db.get_database_backend() == DbBackend::Postgres).then(|| {
        let pool = db.get_postgres_connection_pool();
        (*pool.connect_options())
            .clone()
            .application_name(APPLICATION_NAME)
    })
}

impl Listener {
    /// Opens the connection and starts listening. Notifications committed from the
    /// moment this returns are heard.
    pub async fn connect(options: &PgConnectOptions) -> Result<Self, sea_orm::sqlx::Error> {
        // A pool of one, outside the serving pool: it never takes a connection from
        // requests, and PgListener uses it to reconnect by itself.
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false)
            .connect_lazy_with(options.clone());
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(Self(listener))
    }

    /// Waits for the next notification. A connection lost while waiting is reopened
    /// (and listening again) before this answers [`Heard::Gap`]; an error means it
    /// could not be, and this listener should be dropped.
    pub async fn next(&mut self) -> Result<Heard, sea_orm::sqlx::Error> {
        Ok(match self.0.try_recv().await? {
            Some(notification) => match notification.payload().parse() {
                Ok(generation) => Heard::Generation(generation),
                Err(_) => {
                    tracing::warn!(
                        payload.bytes = notification.payload().len(),
                        "a notification on the generation channel is not a number"
                    );
                    Heard::Gap
                }
            },
            None => {
                tracing::info!(
                    "the connection listening for other replicas' changes was lost and is listening again"
                );
                Heard::Gap
            }
        })
    }
}
