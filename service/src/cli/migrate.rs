//! `loadout migrate up|down|status|fresh|refresh|reset`.

use sea_orm::DatabaseConnection;

use crate::db::migrate::{self, MigrateCommand};
use crate::vocab::{Clock, SystemClock};

pub async fn run(db: &DatabaseConnection, command: MigrateCommand) -> anyhow::Result<()> {
    let states = migrate::run(db, command).await?;
    // A database migrated to the end serves its agents as revisions at once, as
    // after `serve`: revision 1 with `production` and `latest` for every agent
    // that has none (nothing for an agent already published).
    let changed = !matches!(
        command,
        MigrateCommand::Status | MigrateCommand::Down { .. }
    );
    if changed && migrate::status(db).await?.iter().all(|m| m.applied) {
        crate::app::start::publish_unrecorded(db, SystemClock.now()).await?;
    }
    if matches!(command, MigrateCommand::Status) {
        for state in states {
            let applied = if state.applied { "applied" } else { "pending" };
            println!("{applied}\t{}", state.name);
        }
    }
    Ok(())
}
