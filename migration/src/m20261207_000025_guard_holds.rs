//! Guard holds (issue 51).
//!
//! - `rollouts.state` gains `held`: a tenant's guard tripped, the base serves
//!   everyone, and a signer resumes or anyone aborts. A held rollout still runs, so
//!   the one-running index covers it: no second rollout starts on a held label.
//! - `rollouts.guard_since`: when a signer resumed a held rollout, the guard judges
//!   the outcomes reported from then on (`NULL`: since it started).
//!
//! `down` drops the column and restores the index as it was.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261207_000025_guard_holds"
    }
}

#[derive(DeriveIden)]
enum Rollouts {
    Table,
    GuardSince,
}

const DROP: &str = "DROP INDEX rollouts_one_running";
const ONE_RUNNING: &str = "CREATE UNIQUE INDEX rollouts_one_running \
     ON rollouts (agent_id, label) WHERE state IN ('active', 'paused', 'held')";
const ONE_RUNNING_BEFORE: &str = "CREATE UNIQUE INDEX rollouts_one_running \
     ON rollouts (agent_id, label) WHERE state IN ('active', 'paused')";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Rollouts::Table)
                    .add_column(
                        ColumnDef::new(Rollouts::GuardSince)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        db.execute_unprepared(DROP).await?;
        db.execute_unprepared(ONE_RUNNING).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(DROP).await?;
        db.execute_unprepared(ONE_RUNNING_BEFORE).await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Rollouts::Table)
                    .drop_column(Rollouts::GuardSince)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
