//! `loadout migrate up|down|status|fresh|refresh|reset`.

use sea_orm::DatabaseConnection;

use crate::db::migrate::{self, MigrateCommand};

pub async fn run(db: &DatabaseConnection, command: MigrateCommand) -> anyhow::Result<()> {
    let states = migrate::run(db, command).await?;
    if matches!(command, MigrateCommand::Status) {
        for state in states {
            let applied = if state.applied { "applied" } else { "pending" };
            println!("{applied}\t{}", state.name);
        }
    }
    Ok(())
}
