//! What a sync needs to take MCP servers' schemas as they are (issue 21).
//!
//! - `tools.remote_schema`: the input schema the remote server published, as it
//!   sent it; `NULL` for tools an admin made. A synced tool's `parameters` are that
//!   schema normalized into strict form (every property required, the optional ones
//!   nullable), and a call drops the nulls of the properties this schema left
//!   optional before the remote is called, so the remote receives only what it
//!   declared.
//! - `tools.strict`: `false` for a tool an admin accepted with a schema strict mode
//!   cannot express (`allow_loose`): it is exported with `strict: false` and
//!   `loadout check` warns about it. `true` for every other tool, existing ones
//!   included.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000012_synced_tool_schemas"
    }
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    RemoteSchema,
    Strict,
    DeletedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for column in [
            ColumnDef::new(Tools::RemoteSchema)
                .json_binary()
                .null()
                .take(),
            ColumnDef::new(Tools::Strict)
                .boolean()
                .not_null()
                .default(true)
                .take(),
        ] {
            let mut column = column;
            manager
                .alter_table(
                    Table::alter()
                        .table(Tools::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    /// Refuses, changing nothing, while a live tool was accepted loose: without the
    /// flag its schema is an error of `loadout check`, and serving stops on it.
    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let loose: i64 = db
            .query_one(
                Query::select()
                    .expr_as(Expr::col(Asterisk).count(), "n")
                    .from(Tools::Table)
                    .and_where(Expr::col(Tools::Strict).eq(false))
                    .and_where(Expr::col(Tools::DeletedAt).is_null()),
            )
            .await?
            .map_or(Ok(0), |row| row.try_get("", "n"))?;
        if loose > 0 {
            return Err(DbErr::Migration(format!(
                "{loose} live tool(s) were accepted with a loose schema (allow_loose); without the flag the registry check refuses them. Delete them first"
            )));
        }
        for column in ["strict", "remote_schema"] {
            db.execute_unprepared(&format!("ALTER TABLE tools DROP COLUMN {column}"))
                .await?;
        }
        Ok(())
    }
}
