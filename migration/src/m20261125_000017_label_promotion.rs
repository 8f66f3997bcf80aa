//! Promotion with sign-off, rollback and the history of who approved (issue 25,
//! items 3 to 5).
//!
//! - `agent_labels.protected`: in `gated` mode a protected label moves only by an
//!   approved change request (or a rollback). `production` is always protected;
//!   existing `production` rows are marked so here, and the service treats the
//!   name as protected whatever the column says.
//! - `change_requests`: a request to move a protected label, waiting for someone
//!   entitled to sign off who is not its author. One row holds its whole life
//!   (requested, then at most one decision: approved, declined, expired,
//!   superseded), so the decision is columns rather than an events table. At most
//!   one request per label is `pending` (a partial unique index, so two racing
//!   requests end with one 409).
//! - `label_moves` gains `approver`, `reason` and `change_request_id`.
//!
//! `down` drops the table, the index and the columns.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000017_label_promotion"
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
enum AgentLabels {
    Table,
    Protected,
}

#[derive(DeriveIden)]
enum LabelMoves {
    Table,
    Approver,
    Reason,
    ChangeRequestId,
}

#[derive(DeriveIden)]
enum ChangeRequests {
    Table,
    Id,
    AgentId,
    Label,
    FromRevisionId,
    ToRevisionId,
    State,
    Reason,
    RequestedBy,
    RequestedKeyId,
    CreatedAt,
    ExpiresAt,
    DecidedBy,
    DecidedKeyId,
    DecidedAt,
    DecisionReason,
}

const ONE_PENDING: &str = "CREATE UNIQUE INDEX change_requests_one_pending \
     ON change_requests (agent_id, label) WHERE state = 'pending'";

fn revision_fk(column: ChangeRequests) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(ChangeRequests::Table, column)
        .to(AgentRevisions::Table, AgentRevisions::Id)
        .to_owned()
}

fn stamp(column: ChangeRequests, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.timestamp_with_time_zone();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
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
                    .table(ChangeRequests::Table)
                    .col(
                        ColumnDef::new(ChangeRequests::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(ChangeRequests::AgentId).integer().not_null())
                    .col(ColumnDef::new(ChangeRequests::Label).string().not_null())
                    .col(
                        ColumnDef::new(ChangeRequests::FromRevisionId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ChangeRequests::ToRevisionId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(ChangeRequests::State).string().not_null())
                    .col(ColumnDef::new(ChangeRequests::Reason).text().null())
                    .col(
                        ColumnDef::new(ChangeRequests::RequestedBy)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(ChangeRequests::RequestedKeyId)
                            .integer()
                            .not_null(),
                    )
                    .col(stamp(ChangeRequests::CreatedAt, false))
                    .col(stamp(ChangeRequests::ExpiresAt, false))
                    .col(ColumnDef::new(ChangeRequests::DecidedBy).string().null())
                    .col(
                        ColumnDef::new(ChangeRequests::DecidedKeyId)
                            .integer()
                            .null(),
                    )
                    .col(stamp(ChangeRequests::DecidedAt, true))
                    .col(ColumnDef::new(ChangeRequests::DecisionReason).text().null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(ChangeRequests::Table, ChangeRequests::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .foreign_key(&mut revision_fk(ChangeRequests::FromRevisionId))
                    .foreign_key(&mut revision_fk(ChangeRequests::ToRevisionId))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(ONE_PENDING).await?;
        manager
            .alter_table(
                Table::alter()
                    .table(AgentLabels::Table)
                    .add_column(
                        ColumnDef::new(AgentLabels::Protected)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        db.execute_unprepared("UPDATE agent_labels SET protected = TRUE WHERE name = 'production'")
            .await?;
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        for column in [
            ColumnDef::new(LabelMoves::Approver)
                .string()
                .null()
                .to_owned(),
            ColumnDef::new(LabelMoves::Reason).text().null().to_owned(),
            ColumnDef::new(LabelMoves::ChangeRequestId)
                .integer()
                .null()
                .to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(LabelMoves::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for column in ["change_request_id", "reason", "approver"] {
            db.execute_unprepared(&format!("ALTER TABLE label_moves DROP COLUMN {column}"))
                .await?;
        }
        db.execute_unprepared("ALTER TABLE agent_labels DROP COLUMN protected")
            .await?;
        db.execute_unprepared("DROP INDEX change_requests_one_pending")
            .await?;
        manager
            .drop_table(Table::drop().table(ChangeRequests::Table).to_owned())
            .await
    }
}
