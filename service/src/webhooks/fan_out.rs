//! Deriving deliveries from the outbox, after the write that recorded the event
//! committed (see `crate::events`).
//!
//! Each event is fanned out in a transaction of its own: a conditional stamp of
//! `fanned_out_at` (of several processes, exactly one wins; on Postgres the loser
//! waits on the row and then finds it stamped), then one pending delivery per
//! subscription that wanted the event when it was recorded, inserted
//! [`CHUNK`] rows at a time so no number of subscriptions reaches a database's
//! limit on one statement. A tenant already holding `max_pending` pending
//! deliveries gets the new one as `failed` with no attempt (its receivers are not
//! keeping up; the delivery log shows it), so no tenant's backlog grows without
//! bound. An event nobody wanted leaves no row.

use chrono::{DateTime, Utc};
use entity::{webhook_deliveries, webhook_events, webhook_subscriptions};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use std::collections::HashMap;

use super::deliver::{FAILED, PENDING};
use super::subscriptions::ACTIVE;
use crate::error::Result;
use crate::events::wants;

/// Events fanned out in one pass.
pub const EVENTS_PER_PASS: u64 = 32;
/// Delivery rows per INSERT (9 values each: far below SQLite's 32,766 and
/// Postgres's 65,535 bind parameters).
pub const CHUNK: usize = 500;

/// Fans out up to [`EVENTS_PER_PASS`] recorded events; how many it took.
pub async fn run(db: &DatabaseConnection, max_pending: u64, now: DateTime<Utc>) -> Result<usize> {
    let waiting: Vec<webhook_events::Model> = webhook_events::Entity::find()
        .filter(webhook_events::Column::FannedOutAt.is_null())
        .order_by_asc(webhook_events::Column::Id)
        .limit(EVENTS_PER_PASS)
        .all(db)
        .await?;
    let mut done = 0;
    for event in waiting {
        if one(db, &event, max_pending, now).await? {
            done += 1;
        }
    }
    Ok(done)
}

/// Fans out `event` in one transaction; `false` if another process had.
async fn one(
    db: &DatabaseConnection,
    event: &webhook_events::Model,
    max_pending: u64,
    now: DateTime<Utc>,
) -> Result<bool> {
    let txn = crate::db::begin_write(db).await?;
    let won = webhook_events::Entity::update_many()
        .col_expr(webhook_events::Column::FannedOutAt, Expr::value(Some(now)))
        .filter(webhook_events::Column::Id.eq(event.id))
        .filter(webhook_events::Column::FannedOutAt.is_null())
        .exec(&txn)
        .await?
        .rows_affected;
    if won != 1 {
        txn.rollback().await?;
        return Ok(false);
    }
    let mut query = webhook_subscriptions::Entity::find()
        .filter(webhook_subscriptions::Column::DeletedAt.is_null())
        .filter(webhook_subscriptions::Column::State.eq(ACTIVE))
        .filter(webhook_subscriptions::Column::CreatedAt.lte(event.created_at));
    if let Some(tenant) = &event.tenant_id {
        query = query.filter(webhook_subscriptions::Column::TenantId.eq(tenant));
    }
    let wanting: Vec<(i32, String)> = query
        .all(&txn)
        .await?
        .into_iter()
        .filter(|s| wants(&s.events, &event.event_type))
        .map(|s| (s.id, s.tenant_id))
        .collect();
    if wanting.is_empty() {
        // The change stream replays its events from the outbox (`Last-Event-ID`):
        // those stay, stamped; an event nobody wants goes.
        if !crate::changes::TYPES.contains(&event.event_type.as_str()) {
            webhook_events::Entity::delete_by_id(event.id)
                .exec(&txn)
                .await?;
        }
        txn.commit().await?;
        return Ok(true);
    }
    let full = full_tenants(&txn, max_pending).await?;
    let rows: Vec<webhook_deliveries::ActiveModel> = wanting
        .into_iter()
        .map(|(subscription, tenant)| webhook_deliveries::ActiveModel {
            event_id: Set(event.id),
            subscription_id: Set(subscription),
            state: Set(match full.contains_key(&tenant) {
                true => FAILED.to_owned(),
                false => PENDING.to_owned(),
            }),
            attempts: Set(0),
            next_attempt_at: Set(now),
            lease_until: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        })
        .collect();
    for (tenant, pending) in &full {
        tracing::warn!(%tenant, pending, "a tenant's pending webhook deliveries are at the bound; new ones are recorded as failed");
    }
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<_> = rows.by_ref().take(CHUNK).collect();
        webhook_deliveries::Entity::insert_many(chunk)
            .exec_without_returning(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(true)
}

/// The tenants holding at least `max_pending` pending deliveries, with the count.
async fn full_tenants(
    db: &impl sea_orm::ConnectionTrait,
    max_pending: u64,
) -> Result<HashMap<String, i64>> {
    let per_subscription: Vec<(i32, i64)> = webhook_deliveries::Entity::find()
        .select_only()
        .column(webhook_deliveries::Column::SubscriptionId)
        .column_as(webhook_deliveries::Column::Id.count(), "pending")
        .filter(webhook_deliveries::Column::State.eq(PENDING))
        .group_by(webhook_deliveries::Column::SubscriptionId)
        .into_tuple()
        .all(db)
        .await?;
    if per_subscription.is_empty() {
        return Ok(HashMap::new());
    }
    let tenants: HashMap<i32, String> = webhook_subscriptions::Entity::find()
        .select_only()
        .column(webhook_subscriptions::Column::Id)
        .column(webhook_subscriptions::Column::TenantId)
        .into_tuple::<(i32, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let mut counts: HashMap<String, i64> = HashMap::new();
    for (subscription, pending) in per_subscription {
        if let Some(tenant) = tenants.get(&subscription) {
            *counts.entry(tenant.clone()).or_default() += pending;
        }
    }
    let bound = i64::try_from(max_pending).unwrap_or(i64::MAX);
    counts.retain(|_, pending| *pending >= bound);
    Ok(counts)
}
