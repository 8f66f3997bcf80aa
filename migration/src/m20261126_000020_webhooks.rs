//! Signed webhooks for every change (issue 26, item 4).
//!
//! - `webhook_subscriptions`: where to post (a URL), which event types (`*` or a
//!   comma-separated list), the signing secret sealed at rest, the tenant it belongs
//!   to, active or disabled (with the reason), the run of failed attempts since the
//!   last success. Deletes are soft.
//! - `webhook_events`: the outbox. One row per event that some subscription wanted,
//!   written in the transaction of the change, holding the exact body that is
//!   signed and sent and its `webhook-id` (`msg_...`, unique).
//! - `webhook_deliveries`: one row per (event, subscription): pending, delivered
//!   or failed (its attempts ran out), the attempts made, when the next is due, and
//!   a lease while one process is posting it.
//! - `webhook_attempts`: the delivery log, one row per attempt (status, duration,
//!   error, a short excerpt of the answer); pruned to the newest rows per
//!   subscription.
//!
//! `down` drops the four tables.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261126_000020_webhooks"
    }
}

#[derive(DeriveIden)]
enum WebhookSubscriptions {
    Table,
    Id,
    TenantId,
    Url,
    Events,
    Secret,
    Description,
    State,
    DisabledReason,
    Failures,
    CreatedBy,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum WebhookEvents {
    Table,
    Id,
    MessageId,
    EventType,
    TenantId,
    Body,
    CreatedAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    Id,
    EventId,
    SubscriptionId,
    State,
    Attempts,
    NextAttemptAt,
    LeaseUntil,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum WebhookAttempts {
    Table,
    Id,
    DeliveryId,
    SubscriptionId,
    Attempt,
    Status,
    DurationMs,
    Error,
    Excerpt,
    At,
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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        use WebhookAttempts as A;
        use WebhookDeliveries as D;
        use WebhookEvents as E;
        use WebhookSubscriptions as S;
        manager
            .create_table(
                Table::create()
                    .table(S::Table)
                    .col(id(S::Id))
                    .col(ColumnDef::new(S::TenantId).string().not_null())
                    .col(ColumnDef::new(S::Url).text().not_null())
                    .col(ColumnDef::new(S::Events).text().not_null())
                    .col(ColumnDef::new(S::Secret).text().not_null())
                    .col(ColumnDef::new(S::Description).text().null())
                    .col(ColumnDef::new(S::State).string().not_null())
                    .col(ColumnDef::new(S::DisabledReason).text().null())
                    .col(ColumnDef::new(S::Failures).integer().not_null().default(0))
                    .col(ColumnDef::new(S::CreatedBy).string().not_null())
                    .col(stamp(S::CreatedAt, false))
                    .col(stamp(S::UpdatedAt, false))
                    .col(stamp(S::DeletedAt, true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(E::Table)
                    .col(id(E::Id))
                    .col(
                        ColumnDef::new(E::MessageId)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(E::EventType).string().not_null())
                    .col(ColumnDef::new(E::TenantId).string().null())
                    .col(ColumnDef::new(E::Body).text().not_null())
                    .col(stamp(E::CreatedAt, false))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(D::Table)
                    .col(id(D::Id))
                    .col(ColumnDef::new(D::EventId).integer().not_null())
                    .col(ColumnDef::new(D::SubscriptionId).integer().not_null())
                    .col(ColumnDef::new(D::State).string().not_null())
                    .col(ColumnDef::new(D::Attempts).integer().not_null().default(0))
                    .col(stamp(D::NextAttemptAt, false))
                    .col(stamp(D::LeaseUntil, true))
                    .col(stamp(D::CreatedAt, false))
                    .col(stamp(D::UpdatedAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(D::Table, D::EventId)
                            .to(E::Table, E::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(D::Table, D::SubscriptionId)
                            .to(S::Table, S::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("webhook_deliveries_due")
                    .table(D::Table)
                    .col(D::State)
                    .col(D::NextAttemptAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(A::Table)
                    .col(id(A::Id))
                    .col(ColumnDef::new(A::DeliveryId).integer().not_null())
                    .col(ColumnDef::new(A::SubscriptionId).integer().not_null())
                    .col(ColumnDef::new(A::Attempt).integer().not_null())
                    .col(ColumnDef::new(A::Status).integer().null())
                    .col(ColumnDef::new(A::DurationMs).integer().not_null())
                    .col(ColumnDef::new(A::Error).text().null())
                    .col(ColumnDef::new(A::Excerpt).text().null())
                    .col(stamp(A::At, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(A::Table, A::DeliveryId)
                            .to(D::Table, D::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("webhook_attempts_by_subscription")
                    .table(A::Table)
                    .col(A::SubscriptionId)
                    .col(A::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            WebhookAttempts::Table.into_iden(),
            WebhookDeliveries::Table.into_iden(),
            WebhookEvents::Table.into_iden(),
            WebhookSubscriptions::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}
