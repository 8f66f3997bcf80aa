//! The schema as it stood before the registry was canonicalized: no
//! `prompt_template` yet. Every table soft-deletes through `deleted_at`.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260224_000001_create_base_schema"
    }
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    Id,
    Name,
    Type,
    Description,
    ApprovalTier,
    Parameters,
    PromptSection,
    IsActive,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
    Name,
    Identity,
    Soul,
}

#[derive(DeriveIden)]
enum AgentTools {
    Table,
    Id,
    AgentId,
    ToolId,
    IsActive,
}

#[derive(DeriveIden)]
enum UserAgentPromptCustomizations {
    Table,
    Id,
    UserId,
    AgentId,
    Instructions,
    IsActive,
}

#[derive(DeriveIden)]
#[allow(clippy::enum_variant_names)] // the column names are what they are
enum Stamp {
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

/// `created_at`, `updated_at` and the soft-delete stamp, shared by every table.
fn with_stamps(table: &mut TableCreateStatement) -> &mut TableCreateStatement {
    table
        .col(
            ColumnDef::new(Stamp::CreatedAt)
                .timestamp_with_time_zone()
                .not_null(),
        )
        .col(
            ColumnDef::new(Stamp::UpdatedAt)
                .timestamp_with_time_zone()
                .not_null(),
        )
        .col(
            ColumnDef::new(Stamp::DeletedAt)
                .timestamp_with_time_zone()
                .null(),
        )
}

fn id<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .take()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        // sea-orm-migration only wraps Postgres migrations by default; SQLite must not be left half-built either.
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                with_stamps(
                    Table::create()
                        .table(Tools::Table)
                        .col(id(Tools::Id))
                        .col(ColumnDef::new(Tools::Name).string().not_null().unique_key())
                        .col(ColumnDef::new(Tools::Type).string().not_null())
                        .col(ColumnDef::new(Tools::Description).text().not_null())
                        // Text rather than an enum type, so `loadout check` can report a bad value instead of failing to load it.
                        .col(ColumnDef::new(Tools::ApprovalTier).string().not_null())
                        .col(ColumnDef::new(Tools::Parameters).json_binary().not_null())
                        .col(ColumnDef::new(Tools::PromptSection).text().null())
                        .col(
                            ColumnDef::new(Tools::IsActive)
                                .boolean()
                                .not_null()
                                .default(true),
                        ),
                )
                .to_owned(),
            )
            .await?;

        manager
            .create_table(
                with_stamps(
                    Table::create()
                        .table(AgentConfigurations::Table)
                        .col(id(AgentConfigurations::Id))
                        .col(
                            ColumnDef::new(AgentConfigurations::Name)
                                .string()
                                .not_null()
                                .unique_key(),
                        )
                        .col(
                            ColumnDef::new(AgentConfigurations::Identity)
                                .json_binary()
                                .not_null(),
                        )
                        .col(ColumnDef::new(AgentConfigurations::Soul).text().not_null()),
                )
                .to_owned(),
            )
            .await?;

        manager
            .create_table(
                with_stamps(
                    Table::create()
                        .table(AgentTools::Table)
                        .col(id(AgentTools::Id))
                        .col(ColumnDef::new(AgentTools::AgentId).integer().not_null())
                        .col(ColumnDef::new(AgentTools::ToolId).integer().not_null())
                        .col(
                            ColumnDef::new(AgentTools::IsActive)
                                .boolean()
                                .not_null()
                                .default(true),
                        )
                        .foreign_key(
                            ForeignKey::create()
                                .from(AgentTools::Table, AgentTools::AgentId)
                                .to(AgentConfigurations::Table, AgentConfigurations::Id),
                        )
                        .foreign_key(
                            ForeignKey::create()
                                .from(AgentTools::Table, AgentTools::ToolId)
                                .to(Tools::Table, Tools::Id),
                        )
                        .index(
                            Index::create()
                                .name("agent_tools_agent_tool_key")
                                .col(AgentTools::AgentId)
                                .col(AgentTools::ToolId)
                                .unique(),
                        ),
                )
                .to_owned(),
            )
            .await?;

        manager
            .create_table(
                with_stamps(
                    Table::create()
                        .table(UserAgentPromptCustomizations::Table)
                        .col(id(UserAgentPromptCustomizations::Id))
                        .col(
                            ColumnDef::new(UserAgentPromptCustomizations::UserId)
                                .string()
                                .not_null(),
                        )
                        .col(
                            ColumnDef::new(UserAgentPromptCustomizations::AgentId)
                                .integer()
                                .not_null(),
                        )
                        .col(
                            ColumnDef::new(UserAgentPromptCustomizations::Instructions)
                                .text()
                                .not_null(),
                        )
                        .col(
                            ColumnDef::new(UserAgentPromptCustomizations::IsActive)
                                .boolean()
                                .not_null()
                                .default(true),
                        )
                        .foreign_key(
                            ForeignKey::create()
                                .from(
                                    UserAgentPromptCustomizations::Table,
                                    UserAgentPromptCustomizations::AgentId,
                                )
                                .to(AgentConfigurations::Table, AgentConfigurations::Id),
                        )
                        .index(
                            Index::create()
                                .name("user_agent_prompt_customizations_user_agent_key")
                                .col(UserAgentPromptCustomizations::UserId)
                                .col(UserAgentPromptCustomizations::AgentId)
                                .unique(),
                        ),
                )
                .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            UserAgentPromptCustomizations::Table.into_iden(),
            AgentTools::Table.into_iden(),
            AgentConfigurations::Table.into_iden(),
            Tools::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
