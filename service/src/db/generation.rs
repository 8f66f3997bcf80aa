//! The configuration generation: one counter in `loadout_state`, bumped inside the
//! transaction of every write that can change what the API serves. A process caches
//! by generation, so an entry read before a write can never be served after it.

use sea_orm::{ConnectionTrait, DbErr, Statement};

/// Adds one to the generation and returns the new value. Call it inside the write's transaction.
pub async fn bump(db: &impl ConnectionTrait) -> Result<i64, DbErr> {
    db.execute_raw(Statement::from_string(
        db.get_database_backend(),
        "UPDATE loadout_state SET generation = generation + 1 WHERE id = 1",
    ))
    .await?;
    current(db).await
}

/// The generation as the database has it.
pub async fn current(db: &impl ConnectionTrait) -> Result<i64, DbErr> {
    let row = db
        .query_one_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT generation FROM loadout_state WHERE id = 1",
        ))
        .await?
        .ok_or_else(|| {
            DbErr::RecordNotFound("loadout_state has no row; run `loadout migrate up`".into())
        })?;
    row.try_get("", "generation")
}
