//! `loadout seed`: create the catalog's tools, the channels and the default agent
//! where absent; never overwrite.

use sea_orm::DatabaseConnection;

use crate::registry::{catalog::Seeds, seed};
use crate::vocab::{Clock, SystemClock};

pub async fn run(db: &DatabaseConnection) -> anyhow::Result<()> {
    let report = seed::run(db, &Seeds::embedded()?, SystemClock.now()).await?;
    println!("{report}");
    Ok(())
}
