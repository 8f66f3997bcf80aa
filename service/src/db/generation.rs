//! The configuration generation: one counter in `loadout_state`, bumped inside the
//! transaction of every write that can change what the API serves. A process caches
//! by generation, so an entry read before a write can never be served after it.
//!
//! On Postgres the bump also notifies [`CHANNEL`] with the new generation; other
//! processes hear it through [`listen`] instead of waiting for their next poll.

pub mod listen;

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

/// The Postgres channel every bump notifies, with the new generation as payload.
pub const CHANNEL: &str = "loadout_generation";

/// Adds one to the generation and returns the new value. Call it inside the write's transaction.
///
/// On Postgres it is one statement that also queues a `NOTIFY` on [`CHANNEL`]: Postgres
/// delivers it when the transaction commits, and never when it rolls back, so a
/// listener never hears of a generation it cannot read yet.
pub async fn bump(db: &impl ConnectionTrait) -> Result<i64, DbErr> {
    let backend = db.get_database_backend();
    if backend == DbBackend::Postgres {
        let row = db
            .query_one_raw(Statement::from_string(
                backend,
                "WITH bumped AS (UPDATE loadout_state SET generation = generation + 1 \
                 WHERE id = 1 RETURNING generation) \
                 SELECT generation, pg_notify('loadout_generation', generation::text) \
                 FROM bumped",
            ))
            .await?
            .ok_or_else(missing_row)?;
        return row.try_get("", "generation");
    }
    db.execute_raw(Statement::from_string(
        backend,
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
        .ok_or_else(missing_row)?;
    row.try_get("", "generation")
}

fn missing_row() -> DbErr {
    DbErr::RecordNotFound("loadout_state has no row; run `loadout migrate up`".into())
}
