//! Rollouts (issue 26, item 1): a label split between its revision and a
//! candidate for a share of users.
//!
//! - `rollouts`: one row per rollout of an agent's label: the base (the label's
//!   revision when it started), the candidate, the share in basis points
//!   (0..=10000), the state (`active`, `paused`, `completed`, `aborted`), the guard
//!   the outcomes judge by (`guard_min_outcomes`, `guard_alpha`; null: no guard),
//!   who started it, and how it ended. At most one `active` or `paused` rollout per
//!   label (a partial unique index, so two racing starts end with one 409).
//! - `rollout_events`: its history (started, share changed, paused, resumed,
//!   completed, aborted), never updated.
//! - `change_requests` gains `kind` (`move`, `rollout_start`, `rollout_complete`)
//!   and what a rollout's sign-off carries: the share, the guard and, for a
//!   completion, the rollout.
//!
//! `down` drops the tables, the index and the columns.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000018_rollouts"
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
enum Rollouts {
    Table,
    Id,
    AgentId,
    Label,
    BaseRevisionId,
    CandidateRevisionId,
    ShareBp,
    State,
    GuardMinOutcomes,
    GuardAlpha,
    Author,
    CreatedAt,
    UpdatedAt,
    EndedAt,
    EndReason,
}

#[derive(DeriveIden)]
enum RolloutEvents {
    Table,
    Id,
    RolloutId,
    Kind,
    Actor,
    ShareBp,
    Reason,
    ChangeRequestId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ChangeRequests {
    Table,
    Kind,
    RolloutShareBp,
    RolloutGuardMinOutcomes,
    RolloutGuardAlpha,
    RolloutId,
}

const ONE_RUNNING: &str = "CREATE UNIQUE INDEX rollouts_one_running \
     ON rollouts (agent_id, label) WHERE state IN ('active', 'paused')";

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

fn revision_fk(column: Rollouts) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(Rollouts::Table, column)
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
                    .table(Rollouts::Table)
                    .col(
                        ColumnDef::new(Rollouts::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Rollouts::AgentId).integer().not_null())
                    .col(ColumnDef::new(Rollouts::Label).string().not_null())
                    .col(
                        ColumnDef::new(Rollouts::BaseRevisionId)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Rollouts::CandidateRevisionId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Rollouts::ShareBp).integer().not_null())
                    .col(ColumnDef::new(Rollouts::State).string().not_null())
                    .col(ColumnDef::new(Rollouts::GuardMinOutcomes).integer().null())
                    .col(ColumnDef::new(Rollouts::GuardAlpha).double().null())
                    .col(ColumnDef::new(Rollouts::Author).string().not_null())
                    .col(stamp(Rollouts::CreatedAt, false))
                    .col(stamp(Rollouts::UpdatedAt, false))
                    .col(stamp(Rollouts::EndedAt, true))
                    .col(ColumnDef::new(Rollouts::EndReason).text().null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(Rollouts::Table, Rollouts::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .foreign_key(&mut revision_fk(Rollouts::BaseRevisionId))
                    .foreign_key(&mut revision_fk(Rollouts::CandidateRevisionId))
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(ONE_RUNNING).await?;
        manager
            .create_table(
                Table::create()
                    .table(RolloutEvents::Table)
                    .col(
                        ColumnDef::new(RolloutEvents::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(RolloutEvents::RolloutId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(RolloutEvents::Kind).string().not_null())
                    .col(ColumnDef::new(RolloutEvents::Actor).string().null())
                    .col(ColumnDef::new(RolloutEvents::ShareBp).integer().not_null())
                    .col(ColumnDef::new(RolloutEvents::Reason).text().null())
                    .col(
                        ColumnDef::new(RolloutEvents::ChangeRequestId)
                            .integer()
                            .null(),
                    )
                    .col(stamp(RolloutEvents::CreatedAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(RolloutEvents::Table, RolloutEvents::RolloutId)
                            .to(Rollouts::Table, Rollouts::Id),
                    )
                    .to_owned(),
            )
            .await?;
        db.execute_unprepared(
            "CREATE INDEX rollout_events_by_rollout ON rollout_events (rollout_id, id)",
        )
        .await?;
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        for column in [
            ColumnDef::new(ChangeRequests::Kind)
                .string()
                .not_null()
                .default("move")
                .to_owned(),
            ColumnDef::new(ChangeRequests::RolloutShareBp)
                .integer()
                .null()
                .to_owned(),
            ColumnDef::new(ChangeRequests::RolloutGuardMinOutcomes)
                .integer()
                .null()
                .to_owned(),
            ColumnDef::new(ChangeRequests::RolloutGuardAlpha)
                .double()
                .null()
                .to_owned(),
            ColumnDef::new(ChangeRequests::RolloutId)
                .integer()
                .null()
                .to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(ChangeRequests::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for column in [
            "rollout_id",
            "rollout_guard_alpha",
            "rollout_guard_min_outcomes",
            "rollout_share_bp",
            "kind",
        ] {
            db.execute_unprepared(&format!("ALTER TABLE change_requests DROP COLUMN {column}"))
                .await?;
        }
        db.execute_unprepared("DROP INDEX rollout_events_by_rollout")
            .await?;
        manager
            .drop_table(Table::drop().table(RolloutEvents::Table).to_owned())
            .await?;
        db.execute_unprepared("DROP INDEX rollouts_one_running")
            .await?;
        manager
            .drop_table(Table::drop().table(Rollouts::Table).to_owned())
            .await
    }
}
