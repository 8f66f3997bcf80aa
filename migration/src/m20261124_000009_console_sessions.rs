//! `console_sessions`: who is signed in to the web console (issue 13).
//!
//! A session is a row, not a signed cookie, so sign-out and a revoked key end it at
//! once on every replica. The browser holds only a random token; the row keeps its
//! SHA-256, the key it was opened with (never the key itself), its CSRF token and
//! its expiry. Sign-out sets `ended_at`: sessions are never deleted.
//!
//! Also `prompt_versions.reason`: why a version was saved over lint errors (the
//! console asks for it when an admin forces a save).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261124_000009_console_sessions"
    }
}

#[derive(DeriveIden)]
enum ConsoleSessions {
    Table,
    Id,
    TokenHash,
    ApiKeyId,
    CsrfToken,
    CreatedAt,
    ExpiresAt,
    EndedAt,
}

#[derive(DeriveIden)]
enum PromptVersions {
    Table,
    Reason,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let stamp = |col| ColumnDef::new(col).timestamp_with_time_zone().take();
        manager
            .create_table(
                Table::create()
                    .table(ConsoleSessions::Table)
                    .col(
                        ColumnDef::new(ConsoleSessions::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::TokenHash)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::ApiKeyId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ConsoleSessions::CsrfToken)
                            .string()
                            .not_null(),
                    )
                    .col(stamp(ConsoleSessions::CreatedAt).not_null())
                    .col(stamp(ConsoleSessions::ExpiresAt).not_null())
                    .col(stamp(ConsoleSessions::EndedAt).null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(ConsoleSessions::Table, ConsoleSessions::ApiKeyId)
                            .to(ApiKeys::Table, ApiKeys::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(PromptVersions::Table)
                    .add_column(ColumnDef::new(PromptVersions::Reason).text().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE prompt_versions DROP COLUMN reason")
            .await?;
        manager
            .drop_table(Table::drop().table(ConsoleSessions::Table).to_owned())
            .await
    }
}
