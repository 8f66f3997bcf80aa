//! The proposal ledger: write tools propose, users decide, approved calls run once.
//!
//! 1. `proposals`: one row per proposed tool call, owned by a tenant, with its state,
//!    attempts, argument hash, result and lease;
//! 2. `proposal_events`: append-only, one row per state transition (who, when, from, to);
//! 3. `user_tool_preferences`: a user's auto-approve choice for a `user_configurable` tool.
//!
//! `down` drops the three tables: none existed before `up`.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260320_000005_proposal_ledger"
    }
}

#[derive(DeriveIden)]
enum Proposals {
    Table,
    Id,
    TenantId,
    AgentId,
    ToolId,
    ToolName,
    UserId,
    ConversationId,
    MessageId,
    Arguments,
    ArgumentsHash,
    Description,
    Preview,
    State,
    Attempts,
    MaxAttempts,
    Result,
    OutcomeUnknown,
    IdempotencyKey,
    RequestHash,
    ExpiresAt,
    LeaseUntil,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ProposalEvents {
    Table,
    Id,
    ProposalId,
    TenantId,
    FromState,
    ToState,
    Actor,
    Detail,
    At,
}

#[derive(DeriveIden)]
enum UserToolPreferences {
    Table,
    Id,
    TenantId,
    UserId,
    ToolId,
    AutoApprove,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    Id,
}

fn id<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .take()
}

fn stamp<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col)
        .timestamp_with_time_zone()
        .not_null()
        .take()
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
                    .table(Proposals::Table)
                    .col(id(Proposals::Id))
                    .col(ColumnDef::new(Proposals::TenantId).string().not_null())
                    .col(ColumnDef::new(Proposals::AgentId).integer().not_null())
                    .col(ColumnDef::new(Proposals::ToolId).integer().not_null())
                    .col(ColumnDef::new(Proposals::ToolName).string().not_null())
                    .col(ColumnDef::new(Proposals::UserId).string().null())
                    .col(
                        ColumnDef::new(Proposals::ConversationId)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Proposals::MessageId).string().null())
                    .col(
                        ColumnDef::new(Proposals::Arguments)
                            .json_binary()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Proposals::ArgumentsHash).string().not_null())
                    .col(ColumnDef::new(Proposals::Description).text().not_null())
                    .col(ColumnDef::new(Proposals::Preview).json_binary().not_null())
                    // proposed | approved | executing | succeeded | failed | declined | expired
                    .col(ColumnDef::new(Proposals::State).string().not_null())
                    .col(
                        ColumnDef::new(Proposals::Attempts)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Proposals::MaxAttempts)
                            .integer()
                            .not_null()
                            .default(3),
                    )
                    .col(ColumnDef::new(Proposals::Result).json_binary().null())
                    .col(
                        ColumnDef::new(Proposals::OutcomeUnknown)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(Proposals::IdempotencyKey).string().null())
                    .col(ColumnDef::new(Proposals::RequestHash).string().null())
                    .col(stamp(Proposals::ExpiresAt))
                    .col(
                        ColumnDef::new(Proposals::LeaseUntil)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(stamp(Proposals::CreatedAt))
                    .col(stamp(Proposals::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Proposals::Table, Proposals::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(Proposals::Table, Proposals::ToolId)
                            .to(Tools::Table, Tools::Id),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            (
                "proposals_tenant_idempotency_key",
                vec![Proposals::TenantId, Proposals::IdempotencyKey],
            ),
            (
                "proposals_tenant_conversation",
                vec![Proposals::TenantId, Proposals::ConversationId],
            ),
            ("proposals_state", vec![Proposals::State]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Proposals::Table);
            for col in cols {
                index.col(col);
            }
            if name == "proposals_tenant_idempotency_key" {
                // NULL keys never collide, on both backends.
                index.unique();
            }
            manager.create_index(index.to_owned()).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(ProposalEvents::Table)
                    .col(id(ProposalEvents::Id))
                    .col(
                        ColumnDef::new(ProposalEvents::ProposalId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(ProposalEvents::TenantId).string().not_null())
                    .col(ColumnDef::new(ProposalEvents::FromState).string().null())
                    .col(ColumnDef::new(ProposalEvents::ToState).string().not_null())
                    .col(ColumnDef::new(ProposalEvents::Actor).string().not_null())
                    .col(ColumnDef::new(ProposalEvents::Detail).json_binary().null())
                    .col(stamp(ProposalEvents::At))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ProposalEvents::Table, ProposalEvents::ProposalId)
                            .to(Proposals::Table, Proposals::Id),
                    )
                    .to_owned(),
            )
            .await?;
        // Separate statement: SQLite takes only UNIQUE constraints inside CREATE TABLE.
        manager
            .create_index(
                Index::create()
                    .name("proposal_events_proposal")
                    .table(ProposalEvents::Table)
                    .col(ProposalEvents::ProposalId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(UserToolPreferences::Table)
                    .col(id(UserToolPreferences::Id))
                    .col(
                        ColumnDef::new(UserToolPreferences::TenantId)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(UserToolPreferences::UserId)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(UserToolPreferences::ToolId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(UserToolPreferences::AutoApprove)
                            .boolean()
                            .not_null(),
                    )
                    .col(stamp(UserToolPreferences::CreatedAt))
                    .col(stamp(UserToolPreferences::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(UserToolPreferences::Table, UserToolPreferences::ToolId)
                            .to(Tools::Table, Tools::Id),
                    )
                    .index(
                        Index::create()
                            .name("user_tool_preferences_key")
                            .col(UserToolPreferences::TenantId)
                            .col(UserToolPreferences::UserId)
                            .col(UserToolPreferences::ToolId)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["user_tool_preferences", "proposal_events", "proposals"] {
            manager
                .drop_table(Table::drop().table(Alias::new(table)).to_owned())
                .await?;
        }
        Ok(())
    }
}
