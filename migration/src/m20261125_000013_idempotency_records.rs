//! `idempotency_records`: admin writes sent with an `Idempotency-Key` (issue 22).
//!
//! The row is inserted inside the write's own transaction, so it exists exactly
//! when the write committed; the answer is stored after. A retry with the same key
//! (per tenant) gets the stored answer instead of a second write. Keys live 24
//! hours; a later request with the same key overwrites an expired row.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000013_idempotency_records"
    }
}

#[derive(DeriveIden)]
enum IdempotencyRecords {
    Table,
    Id,
    TenantId,
    Key,
    Fingerprint,
    Status,
    Body,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyRecords::Table)
                    .col(
                        ColumnDef::new(IdempotencyRecords::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(IdempotencyRecords::TenantId)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(IdempotencyRecords::Key).string().not_null())
                    .col(
                        ColumnDef::new(IdempotencyRecords::Fingerprint)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(IdempotencyRecords::Status).integer().null())
                    .col(ColumnDef::new(IdempotencyRecords::Body).text().null())
                    .col(
                        ColumnDef::new(IdempotencyRecords::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_records_tenant_key")
                    .table(IdempotencyRecords::Table)
                    .col(IdempotencyRecords::TenantId)
                    .col(IdempotencyRecords::Key)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencyRecords::Table).to_owned())
            .await
    }
}
