//! `loadout migrate`: sea-orm-migration's commands, serialised across processes on Postgres.

use anyhow::{Context, bail};
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, TransactionTrait};

/// Key of the Postgres advisory lock held while migrations run ("loadout:migrate").
const MIGRATION_LOCK_KEY: i64 = 0x6c6f_6164_6f75_7401;

/// What `loadout migrate` can do; the semantics are sea-orm-migration's.
#[derive(Clone, Copy, Debug, clap::Subcommand)]
pub enum MigrateCommand {
    /// Apply pending migrations (all, or the next N).
    Up {
        #[arg(short = 'n', long = "num")]
        n: Option<u32>,
    },
    /// Roll back applied migrations (the last one, or the last N).
    Down {
        #[arg(short = 'n', long = "num", default_value_t = 1)]
        n: u32,
    },
    /// List every migration and whether it is applied.
    Status,
    /// Drop every table, then apply all migrations.
    Fresh,
    /// Roll back all migrations, then apply them again.
    Refresh,
    /// Roll back all migrations.
    Reset,
}

/// One migration and whether the database has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationState {
    pub name: String,
    pub applied: bool,
}

/// Runs one migrate command under the lock; returns the status lines for `Status`.
pub async fn run(
    db: &DatabaseConnection,
    command: MigrateCommand,
) -> anyhow::Result<Vec<MigrationState>> {
    with_lock(db, async || apply(db, command).await).await
}

/// Runs one migrate command; the caller holds the lock ([`with_lock`]).
pub async fn apply(
    db: &DatabaseConnection,
    command: MigrateCommand,
) -> anyhow::Result<Vec<MigrationState>> {
    refuse_unknown_migrations(db).await?;
    match command {
        MigrateCommand::Up { n } => Migrator::up(db, n).await,
        MigrateCommand::Down { n } => Migrator::down(db, Some(n)).await,
        MigrateCommand::Status => Ok(()),
        MigrateCommand::Fresh => Migrator::fresh(db).await,
        MigrateCommand::Refresh => Migrator::refresh(db).await,
        MigrateCommand::Reset => Migrator::reset(db).await,
    }
    .context("migration failed; its changes were rolled back")?;
    status(db).await
}

/// Applies every pending migration under the lock.
pub async fn up(db: &DatabaseConnection) -> anyhow::Result<()> {
    run(db, MigrateCommand::Up { n: None }).await.map(drop)
}

/// Every migration the binary knows, in order, with its state.
pub async fn status(db: &DatabaseConnection) -> anyhow::Result<Vec<MigrationState>> {
    let migrations = Migrator::get_migration_with_status(db)
        .await
        .context("cannot read migration status")?;
    Ok(migrations
        .iter()
        .map(|m| MigrationState {
            name: m.name().to_owned(),
            applied: m.status() == migration::MigrationStatus::Applied,
        })
        .collect())
}

/// Fails unless every migration this binary knows is applied and no unknown one is.
pub async fn ensure_current(db: &DatabaseConnection) -> anyhow::Result<()> {
    readiness(db).await.map_err(anyhow::Error::msg)
}

/// Whether this binary can serve the database, in words for `/ready`: never the
/// driver's text (it can name hosts, users and SQL), which goes to the log instead.
pub async fn readiness(db: &DatabaseConnection) -> Result<(), String> {
    let applied = match Migrator::get_migration_models(db).await {
        Ok(applied) => applied,
        Err(e) => {
            tracing::warn!(error = %e, "not ready: cannot read the applied migrations");
            return Err(match crate::db::classify(&e) {
                crate::db::DbFailure::Busy => {
                    "the database is busy: no connection was free within the timeout".to_owned()
                }
                _ => {
                    "the database does not answer, or its migration table cannot be read".to_owned()
                }
            });
        }
    };
    let unknown = unknown_versions(applied.iter().map(|m| m.version.as_str()));
    if !unknown.is_empty() {
        return Err(format!(
            "the database was migrated by a newer loadout ({}); upgrade this one",
            unknown.join(", ")
        ));
    }
    let migrations = Migrator::migrations();
    let pending: Vec<&str> = migrations
        .iter()
        .map(|m| m.name())
        .filter(|k| !applied.iter().any(|m| m.version == *k))
        .collect();
    if !pending.is_empty() {
        return Err(format!(
            "the database is not migrated (pending: {}); run `loadout migrate up`",
            pending.join(", ")
        ));
    }
    Ok(())
}

/// The applied versions this binary does not know: a newer loadout ran them.
fn unknown_versions<'a>(applied: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let migrations = Migrator::migrations();
    applied
        .filter(|v| !migrations.iter().any(|m| m.name() == *v))
        .collect()
}

/// A database migrated by a newer loadout must not be touched by this one.
async fn refuse_unknown_migrations(db: &DatabaseConnection) -> anyhow::Result<()> {
    let applied = Migrator::get_migration_models(db)
        .await
        .context("cannot read applied migrations")?;
    let unknown = unknown_versions(applied.iter().map(|m| m.version.as_str()));
    if !unknown.is_empty() {
        bail!(
            "the database has migrations this loadout does not know ({}); it was migrated by a newer version: upgrade loadout",
            unknown.join(", ")
        );
    }
    Ok(())
}

/// Runs `work` holding a cluster-wide advisory lock on Postgres, so two processes
/// migrating (or starting: migrate, seed, first admin key) on one database take
/// turns: the second finds nothing left to do. The lock lives in its own
/// transaction on its own pooled connection (so the pool needs two) and ends with
/// it, even if this process dies. Not reentrant: `work` must not take it again.
/// SQLite serialises writers itself, and each step there is one write transaction.
pub async fn with_lock<T>(
    db: &DatabaseConnection,
    work: impl AsyncFnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if db.get_database_backend() != DbBackend::Postgres {
        return work().await;
    }
    let lock = db
        .begin()
        .await
        .context("cannot open the migration lock transaction")?;
    lock.execute_unprepared(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
    ))
    .await
    .context("cannot take the migration lock")?;
    let result = work().await;
    lock.rollback()
        .await
        .context("cannot release the migration lock")?;
    result
}
