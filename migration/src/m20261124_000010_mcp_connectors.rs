//! MCP connectors and synced tools (issue 14).
//!
//! - `connectors.kind` names the protocol: `http` (what migration 6 stored as `api`)
//!   or `mcp` (a Streamable HTTP endpoint).
//! - `tools.remote_name`: the tool's name at its connector's server (`tools/call`
//!   uses it); `NULL` for tools an admin made, which are called by their own name.
//! - `tools.synced_description` and `tools.synced_tier`: what the last sync wrote,
//!   so a re-sync can tell an admin's edit (kept) from the server's change (applied).
//! - `tools.remote_gone_at`: when a sync found the remote tool gone (the tool is
//!   switched off, never deleted, and `loadout check` reports it).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261124_000010_mcp_connectors"
    }
}

#[derive(DeriveIden)]
enum Connectors {
    Table,
    Kind,
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    RemoteName,
    SyncedDescription,
    SyncedTier,
    RemoteGoneAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("UPDATE connectors SET kind = 'http' WHERE kind = 'api'")
            .await?;
        // SQLite adds one column per statement.
        for column in [
            ColumnDef::new(Tools::RemoteName).text().null().take(),
            ColumnDef::new(Tools::SyncedDescription)
                .text()
                .null()
                .take(),
            ColumnDef::new(Tools::SyncedTier).text().null().take(),
            ColumnDef::new(Tools::RemoteGoneAt)
                .timestamp_with_time_zone()
                .null()
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

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let mcp: i64 = db
            .query_one(
                Query::select()
                    .expr_as(Expr::col(Asterisk).count(), "n")
                    .from(Connectors::Table)
                    .and_where(Expr::col(Connectors::Kind).eq("mcp")),
            )
            .await?
            .map_or(Ok(0), |row| row.try_get("", "n"))?;
        if mcp > 0 {
            return Err(DbErr::Migration(format!(
                "{mcp} mcp connector(s) exist; the schema before this migration cannot hold them (soft-deleted rows included). Remove them from the database first"
            )));
        }
        for column in [
            "remote_gone_at",
            "synced_tier",
            "synced_description",
            "remote_name",
        ] {
            db.execute_unprepared(&format!("ALTER TABLE tools DROP COLUMN {column}"))
                .await?;
        }
        db.execute_unprepared("UPDATE connectors SET kind = 'api' WHERE kind = 'http'")
            .await?;
        Ok(())
    }
}
