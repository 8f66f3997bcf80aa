//! `api_keys.agent`: an agent key scoped to one agent (issue 15). A scoped key
//! reaches only that agent; every other agent answers 404 to it, as if it did not
//! exist. `NULL` (every key before this migration) reaches every agent, as before.
//! The agent's name, not its id: names are never reused (agents are soft-deleted),
//! and the hot path compares the key's scope with the path's name without a join.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261124_000011_agent_scoped_keys"
    }
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Agent,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(ColumnDef::new(ApiKeys::Agent).text().null())
                    .to_owned(),
            )
            .await
    }

    /// Refuses, changing nothing, while a scoped key is live: without the column it
    /// would reach every agent, which its holder was never given.
    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let scoped: i64 = db
            .query_one(
                Query::select()
                    .expr_as(Expr::col(Asterisk).count(), "n")
                    .from(ApiKeys::Table)
                    .and_where(Expr::col(ApiKeys::Agent).is_not_null())
                    .and_where(Expr::col("revoked_at").is_null()),
            )
            .await?
            .map_or(Ok(0), |row| row.try_get("", "n"))?;
        if scoped > 0 {
            return Err(DbErr::Migration(format!(
                "{scoped} live agent-scoped key(s) exist; without the scope they would reach every agent. Revoke them first"
            )));
        }
        db.execute_unprepared("ALTER TABLE api_keys DROP COLUMN agent")
            .await?;
        Ok(())
    }
}
