//! Connectors: where an `api` tool's approved calls are sent.
//!
//! 1. `connectors`: name, kind (`api`), URL, method, headers (secrets; write-only in
//!    the API), timeout, soft delete;
//! 2. `tools.connector_id`: the connector a tool is bound to (NULL = not connected).
//!
//! `down` drops the column and the table: neither existed before `up`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260401_000006_connectors"
    }
}

#[derive(DeriveIden)]
enum Connectors {
    Table,
    Id,
    Name,
    Kind,
    Url,
    Method,
    Headers,
    TimeoutMs,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    ConnectorId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let stamp = |col: Connectors| ColumnDef::new(col).timestamp_with_time_zone().take();
        manager
            .create_table(
                Table::create()
                    .table(Connectors::Table)
                    .col(
                        ColumnDef::new(Connectors::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(Connectors::Name)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(Connectors::Kind).string().not_null())
                    .col(ColumnDef::new(Connectors::Url).text().not_null())
                    .col(ColumnDef::new(Connectors::Method).string().not_null())
                    .col(ColumnDef::new(Connectors::Headers).json_binary().not_null())
                    .col(ColumnDef::new(Connectors::TimeoutMs).integer().not_null())
                    .col(stamp(Connectors::CreatedAt).not_null())
                    .col(stamp(Connectors::UpdatedAt).not_null())
                    .col(stamp(Connectors::DeletedAt).null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Tools::Table)
                    .add_column(ColumnDef::new(Tools::ConnectorId).integer().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // sea-query refuses DROP COLUMN for SQLite, which has supported it since 3.35.
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE tools DROP COLUMN connector_id")
            .await?;
        manager
            .drop_table(Table::drop().table(Connectors::Table).to_owned())
            .await
    }
}
