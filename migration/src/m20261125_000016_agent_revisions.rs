//! Revisions and labels (issue 25, first slice): what an agent serves is recorded.
//!
//! - `agent_revisions`: an immutable, numbered snapshot of everything an agent
//!   serves apart from request and user data (its canonical JSON and the hex
//!   SHA-256 of it). Numbers count from 1 per agent. Content is stored once per
//!   agent (unique `(agent_id, content_hash)`): publishing content equal to an
//!   older revision points at that revision again instead of making a new number,
//!   so a restore is visibly a return to a known state.
//! - `agent_labels`: named pointers from an agent to one of its revisions
//!   (`production`, `latest`, ...), one per name.
//! - `label_moves`: every move of a label, from which revision to which, what kind
//!   of move (`publish` for now) and who made it. Never updated.
//! - `agent_configurations.release_mode`: `direct` (the default, and what every
//!   existing agent gets: a save moves `production` too, today's behaviour).
//!
//! The rows are written by the service (`releases::publish_all`), not here: the
//! canonical content is what the service reads, and the first start after this
//! migration publishes revision 1 of every agent. `down` drops the three tables and
//! the column; nothing older refers to them.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000016_agent_revisions"
    }
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
    ReleaseMode,
}

#[derive(DeriveIden)]
enum AgentRevisions {
    Table,
    Id,
    AgentId,
    Number,
    ContentHash,
    Content,
    Author,
    CreatedAt,
}

#[derive(DeriveIden)]
enum AgentLabels {
    Table,
    Id,
    AgentId,
    Name,
    RevisionId,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum LabelMoves {
    Table,
    Id,
    AgentId,
    Label,
    FromRevisionId,
    ToRevisionId,
    Kind,
    Actor,
    CreatedAt,
}

fn id(column: impl IntoIden) -> ColumnDef {
    ColumnDef::new(column)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .to_owned()
}

fn stamp(column: impl IntoIden) -> ColumnDef {
    ColumnDef::new(column)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

fn agent_fk(table: impl IntoIden, column: impl IntoIden) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(table, column)
        .to(AgentConfigurations::Table, AgentConfigurations::Id)
        .to_owned()
}

fn revision_fk(table: impl IntoIden, column: impl IntoIden) -> ForeignKeyCreateStatement {
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
                    .table(AgentRevisions::Table)
                    .col(id(AgentRevisions::Id))
                    .col(ColumnDef::new(AgentRevisions::AgentId).integer().not_null())
                    .col(ColumnDef::new(AgentRevisions::Number).integer().not_null())
                    .col(
                        ColumnDef::new(AgentRevisions::ContentHash)
                            .string()
                            .not_null(),
                    )
                    .col(ColumnDef::new(AgentRevisions::Content).text().not_null())
                    .col(ColumnDef::new(AgentRevisions::Author).string().null())
                    .col(stamp(AgentRevisions::CreatedAt))
                    .foreign_key(&mut agent_fk(
                        AgentRevisions::Table,
                        AgentRevisions::AgentId,
                    ))
                    .index(
                        Index::create()
                            .name("agent_revisions_agent_number_key")
                            .col(AgentRevisions::AgentId)
                            .col(AgentRevisions::Number)
                            .unique(),
                    )
                    .index(
                        Index::create()
                            .name("agent_revisions_agent_content_key")
                            .col(AgentRevisions::AgentId)
                            .col(AgentRevisions::ContentHash)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(AgentLabels::Table)
                    .col(id(AgentLabels::Id))
                    .col(ColumnDef::new(AgentLabels::AgentId).integer().not_null())
                    .col(ColumnDef::new(AgentLabels::Name).string().not_null())
                    .col(ColumnDef::new(AgentLabels::RevisionId).integer().not_null())
                    .col(stamp(AgentLabels::UpdatedAt))
                    .foreign_key(&mut agent_fk(AgentLabels::Table, AgentLabels::AgentId))
                    .foreign_key(&mut revision_fk(
                        AgentLabels::Table,
                        AgentLabels::RevisionId,
                    ))
                    .index(
                        Index::create()
                            .name("agent_labels_agent_name_key")
                            .col(AgentLabels::AgentId)
                            .col(AgentLabels::Name)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(LabelMoves::Table)
                    .col(id(LabelMoves::Id))
                    .col(ColumnDef::new(LabelMoves::AgentId).integer().not_null())
                    .col(ColumnDef::new(LabelMoves::Label).string().not_null())
                    .col(ColumnDef::new(LabelMoves::FromRevisionId).integer().null())
                    .col(
                        ColumnDef::new(LabelMoves::ToRevisionId)
                            .integer()
                            .not_null(),
                    )
                    // `publish` for now; `promote` and `rollback` come with promotion.
                    .col(ColumnDef::new(LabelMoves::Kind).string().not_null())
                    .col(ColumnDef::new(LabelMoves::Actor).string().null())
                    .col(stamp(LabelMoves::CreatedAt))
                    .foreign_key(&mut agent_fk(LabelMoves::Table, LabelMoves::AgentId))
                    .foreign_key(&mut revision_fk(
                        LabelMoves::Table,
                        LabelMoves::FromRevisionId,
                    ))
                    .foreign_key(&mut revision_fk(
                        LabelMoves::Table,
                        LabelMoves::ToRevisionId,
                    ))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("label_moves_agent_label")
                    .table(LabelMoves::Table)
                    .col(LabelMoves::AgentId)
                    .col(LabelMoves::Label)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(AgentConfigurations::Table)
                    .add_column(
                        ColumnDef::new(AgentConfigurations::ReleaseMode)
                            .text()
                            .not_null()
                            .default("direct"),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            LabelMoves::Table.into_iden(),
            AgentLabels::Table.into_iden(),
            AgentRevisions::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        manager
            .get_connection()
            .execute_unprepared("ALTER TABLE agent_configurations DROP COLUMN release_mode")
            .await?;
        Ok(())
    }
}
