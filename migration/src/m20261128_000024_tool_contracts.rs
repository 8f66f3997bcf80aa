//! Tool contracts (issue 39).
//!
//! - `connectors.trusted`: a sync applies the server's changes at once (`true`, the
//!   behaviour before this migration, kept for every existing connector) or holds
//!   them for an operator (`false`, what new connectors get).
//! - `tools.pinned_fingerprint`: SHA-256 of the remote definition (name, title,
//!   description, input and output schema, annotations) the tool serves now.
//! - `tool_changes`: a remote definition a sync found that differs from the pin,
//!   `pending` until an operator accepts or rejects it; at most one pending per tool.
//! - `agent_configurations.model_settings`: the model, its parameters and response
//!   schema (JSON), part of every revision published from now on.
//! - `agent_labels.require_checks`: approving a change request for the label
//!   needs its release checks to pass.
//! - `change_requests.checks`: the release checks computed when it opened (JSON).
//! - `render_snapshots`: an agent's expected renders per channel and user (with
//!   the tenant's instructions for that user), which a change request's render
//!   check compares against. Soft-deleted.
//!
//! `down` drops what `up` added.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000024_tool_contracts"
    }
}

#[derive(DeriveIden)]
enum Connectors {
    Table,
    Trusted,
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    Id,
    PinnedFingerprint,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
    ModelSettings,
}

#[derive(DeriveIden)]
enum AgentLabels {
    Table,
    RequireChecks,
}

#[derive(DeriveIden)]
enum ChangeRequests {
    Table,
    Checks,
}

#[derive(DeriveIden)]
enum ToolChanges {
    Table,
    Id,
    ToolId,
    Kind,
    Fingerprint,
    Definition,
    State,
    CreatedAt,
    DecidedAt,
    DecidedBy,
    DecidedMemberId,
}

#[derive(DeriveIden)]
enum RenderSnapshots {
    Table,
    Id,
    AgentId,
    TenantId,
    Channel,
    UserId,
    Expected,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

fn id<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .to_owned()
}

fn stamp<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.timestamp_with_time_zone();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn add<T: IntoIden>(table: T, column: ColumnDef) -> TableAlterStatement {
    Table::alter().table(table).add_column(column).to_owned()
}

fn drop_column<T: IntoIden, C: IntoIden>(table: T, column: C) -> TableAlterStatement {
    Table::alter().table(table).drop_column(column).to_owned()
}

fn flag<C: IntoIden>(column: C, default: bool) -> ColumnDef {
    ColumnDef::new(column)
        .boolean()
        .not_null()
        .default(default)
        .to_owned()
}

const ONE_PENDING: &str = "CREATE UNIQUE INDEX tool_changes_pending \
     ON tool_changes (tool_id) WHERE state = 'pending'";
const SNAPSHOTS_LIVE: &str = "CREATE UNIQUE INDEX render_snapshots_live \
     ON render_snapshots (agent_id, tenant_id, channel, user_id) WHERE deleted_at IS NULL";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Existing connectors keep applying their servers' changes at once; the
        // code gives new ones `false`.
        manager
            .alter_table(add(Connectors::Table, flag(Connectors::Trusted, true)))
            .await?;
        manager
            .alter_table(add(
                Tools::Table,
                ColumnDef::new(Tools::PinnedFingerprint)
                    .text()
                    .null()
                    .to_owned(),
            ))
            .await?;
        manager
            .alter_table(add(
                AgentConfigurations::Table,
                ColumnDef::new(AgentConfigurations::ModelSettings)
                    .text()
                    .null()
                    .to_owned(),
            ))
            .await?;
        manager
            .alter_table(add(
                AgentLabels::Table,
                flag(AgentLabels::RequireChecks, false),
            ))
            .await?;
        manager
            .alter_table(add(
                ChangeRequests::Table,
                ColumnDef::new(ChangeRequests::Checks)
                    .text()
                    .null()
                    .to_owned(),
            ))
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ToolChanges::Table)
                    .col(id(ToolChanges::Id))
                    .col(ColumnDef::new(ToolChanges::ToolId).integer().not_null())
                    .col(ColumnDef::new(ToolChanges::Kind).string().not_null())
                    .col(ColumnDef::new(ToolChanges::Fingerprint).string().not_null())
                    .col(ColumnDef::new(ToolChanges::Definition).text().not_null())
                    .col(ColumnDef::new(ToolChanges::State).string().not_null())
                    .col(stamp(ToolChanges::CreatedAt, false))
                    .col(stamp(ToolChanges::DecidedAt, true))
                    .col(ColumnDef::new(ToolChanges::DecidedBy).string().null())
                    .col(
                        ColumnDef::new(ToolChanges::DecidedMemberId)
                            .integer()
                            .null(),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ToolChanges::Table, ToolChanges::ToolId)
                            .to(Tools::Table, Tools::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(RenderSnapshots::Table)
                    .col(id(RenderSnapshots::Id))
                    .col(
                        ColumnDef::new(RenderSnapshots::AgentId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(RenderSnapshots::TenantId)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(RenderSnapshots::Channel).string().not_null())
                    .col(ColumnDef::new(RenderSnapshots::UserId).string().not_null())
                    .col(ColumnDef::new(RenderSnapshots::Expected).text().not_null())
                    .col(stamp(RenderSnapshots::CreatedAt, false))
                    .col(stamp(RenderSnapshots::UpdatedAt, false))
                    .col(stamp(RenderSnapshots::DeletedAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(RenderSnapshots::Table, RenderSnapshots::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for statement in [ONE_PENDING, SNAPSHOTS_LIVE] {
            db.execute_unprepared(statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(RenderSnapshots::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(ToolChanges::Table).to_owned())
            .await?;
        manager
            .alter_table(drop_column(ChangeRequests::Table, ChangeRequests::Checks))
            .await?;
        manager
            .alter_table(drop_column(AgentLabels::Table, AgentLabels::RequireChecks))
            .await?;
        manager
            .alter_table(drop_column(
                AgentConfigurations::Table,
                AgentConfigurations::ModelSettings,
            ))
            .await?;
        manager
            .alter_table(drop_column(Tools::Table, Tools::PinnedFingerprint))
            .await?;
        manager
            .alter_table(drop_column(Connectors::Table, Connectors::Trusted))
            .await?;
        Ok(())
    }
}
