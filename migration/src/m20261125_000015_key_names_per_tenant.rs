//! Key names are unique per tenant, not across tenants (issue 23): a 409 on a
//! name taken by another tenant told an admin that tenant's key names. The default
//! tenant is `tenant_id` NULL or `default` (operators have no tenant and share the
//! default tenant's names), so the unique index is on
//! `(COALESCE(tenant_id, 'default'), name)`, an expression both backends index.
//!
//! Postgres drops the inline constraint. SQLite cannot drop a constraint declared
//! inside `CREATE TABLE`, so it rebuilds `api_keys` from its own stored DDL with
//! the name's `UNIQUE` taken out. `console_sessions` references `api_keys`, and
//! dropping a referenced table inside a transaction fails its foreign key, so the
//! sessions are copied aside and their table dropped and recreated (from its own
//! DDL) around the rebuild; ids are kept, so open sessions stay open.
//!
//! `down` restores the global unique name; it refuses, changing nothing, while two
//! tenants hold keys of the same name.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000015_key_names_per_tenant"
    }
}

const INDEX: &str = "api_keys_tenant_name";
/// The column as migration 4 declared it on SQLite, and without its `UNIQUE`.
const UNIQUE_NAME: &str = r#""name" varchar NOT NULL UNIQUE"#;
const PLAIN_NAME: &str = r#""name" varchar NOT NULL"#;

async fn table_sql(db: &SchemaManagerConnection<'_>, table: &str) -> Result<String, DbErr> {
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
            [table.into()],
        ))
        .await?
        .ok_or_else(|| DbErr::Migration(format!("no table {table}")))?;
    row.try_get("", "sql")
}

/// Rebuilds SQLite's `api_keys` with its name column declared `from` as `to`.
async fn rebuild_sqlite(
    db: &SchemaManagerConnection<'_>,
    from: &str,
    to: &str,
) -> Result<(), DbErr> {
    let keys = table_sql(db, "api_keys").await?;
    if !keys.contains(from) {
        return Err(DbErr::Migration(format!(
            "api_keys is not as expected (no {from} in {keys:?}); nothing was changed"
        )));
    }
    let rebuilt = keys.replacen(from, to, 1).replacen(
        r#"CREATE TABLE "api_keys""#,
        r#"CREATE TABLE "api_keys_new""#,
        1,
    );
    let sessions = table_sql(db, "console_sessions").await?;
    for statement in [
        "CREATE TABLE console_sessions_keep AS SELECT * FROM console_sessions",
        "DROP TABLE console_sessions",
        &rebuilt,
        "INSERT INTO api_keys_new SELECT * FROM api_keys",
        "DROP TABLE api_keys",
        "ALTER TABLE api_keys_new RENAME TO api_keys",
        &sessions,
        "INSERT INTO console_sessions SELECT * FROM console_sessions_keep",
        "DROP TABLE console_sessions_keep",
    ] {
        db.execute_unprepared(statement).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                db.execute_unprepared("ALTER TABLE api_keys DROP CONSTRAINT api_keys_name_key")
                    .await?;
            }
            _ => rebuild_sqlite(db, UNIQUE_NAME, PLAIN_NAME).await?,
        }
        db.execute_unprepared(&format!(
            "CREATE UNIQUE INDEX {INDEX} ON api_keys ((COALESCE(tenant_id, 'default')), name)"
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let shared = db
            .query_one_raw(Statement::from_string(
                manager.get_database_backend(),
                "SELECT name FROM api_keys GROUP BY name HAVING COUNT(*) > 1 ORDER BY name",
            ))
            .await?;
        if let Some(row) = shared {
            let name: String = row.try_get("", "name")?;
            return Err(DbErr::Migration(format!(
                "cannot roll back m20261125_000015_key_names_per_tenant: more than one tenant \
                 has a key named {name:?}, and the old table holds one key per name; rename or \
                 remove all but one first (nothing was changed)"
            )));
        }
        db.execute_unprepared(&format!("DROP INDEX {INDEX}"))
            .await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                db.execute_unprepared(
                    "ALTER TABLE api_keys ADD CONSTRAINT api_keys_name_key UNIQUE (name)",
                )
                .await?;
            }
            _ => rebuild_sqlite(db, PLAIN_NAME, UNIQUE_NAME).await?,
        }
        Ok(())
    }
}
