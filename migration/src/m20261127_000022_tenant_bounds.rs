//! Bounds that keep one tenant from exhausting what every tenant shares (issue 35).
//!
//! - `webhook_events.fanned_out_at`: a write records its event and nothing else;
//!   the delivery job derives the deliveries after the commit, in bounded batches,
//!   and stamps the event. Existing events already have their deliveries, so they
//!   are stamped with their creation time.
//! - `outcomes_by_revision` (revision, updated_at): the guard's counts read one
//!   index range instead of the whole table; `outcomes_by_subject` (revision,
//!   user): the bound on outcomes per rollout and subject counts one range.
//!
//! `down` drops what `up` added.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000022_tenant_bounds"
    }
}

#[derive(DeriveIden)]
enum WebhookEvents {
    Table,
    FannedOutAt,
}

const STAMP_EXISTING: &str = "UPDATE webhook_events SET fanned_out_at = created_at";
const EVENTS_WAITING: &str =
    "CREATE INDEX webhook_events_fan_out ON webhook_events (fanned_out_at, id)";
const OUTCOMES_BY_REVISION: &str =
    "CREATE INDEX outcomes_by_revision ON outcomes (revision_id, updated_at)";
const OUTCOMES_BY_SUBJECT: &str =
    "CREATE INDEX outcomes_by_subject ON outcomes (revision_id, user_id)";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEvents::Table)
                    .add_column(
                        ColumnDef::new(WebhookEvents::FannedOutAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for statement in [
            STAMP_EXISTING,
            EVENTS_WAITING,
            OUTCOMES_BY_REVISION,
            OUTCOMES_BY_SUBJECT,
        ] {
            db.execute_unprepared(statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for index in [
            "webhook_events_fan_out",
            "outcomes_by_revision",
            "outcomes_by_subject",
        ] {
            db.execute_unprepared(&format!("DROP INDEX IF EXISTS {index}"))
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(WebhookEvents::Table)
                    .drop_column(WebhookEvents::FannedOutAt)
                    .to_owned(),
            )
            .await
    }
}
