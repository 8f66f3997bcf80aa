//! Outcomes and what loadout records itself, per revision (issue 26, item 2).
//!
//! - `outcomes`: what a client reported about a conversation served by a
//!   revision (`success` or `failure`, an optional score). One row per tenant,
//!   revision and conversation (a unique key): a repeated report replaces the
//!   earlier one, so the latest report per conversation counts once and a client
//!   cannot weigh a side by repeating itself.
//! - `revision_signals`: counters per tenant, revision and signal (tool calls,
//!   invalid-argument refusals, proposals decided and declined, executions and
//!   failed executions), upserted in the transaction of the event they count. A
//!   counter row rather than a query over `proposals` because refusals leave no
//!   row anywhere and the reads stay one small index scan per revision.
//! - `proposals.revision_id`: the revision a call was validated under, so a
//!   decision or an execution long after the call counts for that revision.
//!   NULL for proposals made before this migration (they count for none). No
//!   foreign key: SQLite cannot add one to an existing table.
//!
//! `down` drops the two tables and the column.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000019_outcomes"
    }
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum AgentRevisions {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Proposals {
    Table,
    RevisionId,
}

#[derive(DeriveIden)]
enum Outcomes {
    Table,
    Id,
    TenantId,
    AgentId,
    RevisionId,
    ConversationId,
    UserId,
    Outcome,
    Score,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum RevisionSignals {
    Table,
    Id,
    TenantId,
    AgentId,
    RevisionId,
    Signal,
    Count,
    UpdatedAt,
}

fn id<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .to_owned()
}

fn stamp<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

fn agent_fk<T: IntoIden, C: IntoIden>(table: T, column: C) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(table, column)
        .to(AgentConfigurations::Table, AgentConfigurations::Id)
        .to_owned()
}

fn revision_fk<T: IntoIden, C: IntoIden>(table: T, column: C) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(table, column)
        .to(AgentRevisions::Table, AgentRevisions::Id)
        .to_owned()
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
                    .table(Outcomes::Table)
                    .col(id(Outcomes::Id))
                    .col(ColumnDef::new(Outcomes::TenantId).string().not_null())
                    .col(ColumnDef::new(Outcomes::AgentId).integer().not_null())
                    .col(ColumnDef::new(Outcomes::RevisionId).integer().not_null())
                    .col(ColumnDef::new(Outcomes::ConversationId).string().not_null())
                    .col(ColumnDef::new(Outcomes::UserId).string().null())
                    .col(ColumnDef::new(Outcomes::Outcome).string().not_null())
                    .col(ColumnDef::new(Outcomes::Score).double().null())
                    .col(stamp(Outcomes::CreatedAt))
                    .col(stamp(Outcomes::UpdatedAt))
                    .foreign_key(&mut agent_fk(Outcomes::Table, Outcomes::AgentId))
                    .foreign_key(&mut revision_fk(Outcomes::Table, Outcomes::RevisionId))
                    .index(
                        Index::create()
                            .name("outcomes_one_per_conversation")
                            .col(Outcomes::TenantId)
                            .col(Outcomes::RevisionId)
                            .col(Outcomes::ConversationId)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("outcomes_agent_revision")
                    .table(Outcomes::Table)
                    .col(Outcomes::AgentId)
                    .col(Outcomes::RevisionId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(RevisionSignals::Table)
                    .col(id(RevisionSignals::Id))
                    .col(
                        ColumnDef::new(RevisionSignals::TenantId)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(RevisionSignals::AgentId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(RevisionSignals::RevisionId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(RevisionSignals::Signal).string().not_null())
                    .col(
                        ColumnDef::new(RevisionSignals::Count)
                            .big_integer()
                            .not_null(),
                    )
                    .col(stamp(RevisionSignals::UpdatedAt))
                    .foreign_key(&mut agent_fk(
                        RevisionSignals::Table,
                        RevisionSignals::AgentId,
                    ))
                    .foreign_key(&mut revision_fk(
                        RevisionSignals::Table,
                        RevisionSignals::RevisionId,
                    ))
                    .index(
                        Index::create()
                            .name("revision_signals_key")
                            .col(RevisionSignals::TenantId)
                            .col(RevisionSignals::RevisionId)
                            .col(RevisionSignals::Signal)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("revision_signals_agent_revision")
                    .table(RevisionSignals::Table)
                    .col(RevisionSignals::AgentId)
                    .col(RevisionSignals::RevisionId)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Proposals::Table)
                    .add_column(ColumnDef::new(Proposals::RevisionId).integer().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("ALTER TABLE proposals DROP COLUMN revision_id")
            .await?;
        for table in [
            RevisionSignals::Table.into_iden(),
            Outcomes::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
