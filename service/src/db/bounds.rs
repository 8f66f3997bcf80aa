//! Counting what a tenant holds inside the write that adds one, so two concurrent
//! writes cannot both pass a bound. On SQLite the write transaction already holds
//! the database's write lock (`BEGIN IMMEDIATE`); on Postgres [`serialize`] takes a
//! transaction-scoped advisory lock per tenant and kind, so writes of other tenants
//! and other kinds never wait on it.

use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};
use sha2::{Digest, Sha256};

/// Serializes, until `txn` ends, the writes that count `kind` for `tenant`.
pub async fn serialize(txn: &impl ConnectionTrait, kind: &str, tenant: &str) -> Result<(), DbErr> {
    if txn.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    let digest = Sha256::digest(format!("{kind}\n{tenant}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let key = i64::from_be_bytes(first);
    txn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT pg_advisory_xact_lock($1)",
        [key.into()],
    ))
    .await?;
    Ok(())
}
