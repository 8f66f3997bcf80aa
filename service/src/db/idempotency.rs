//! Admin writes sent with an `Idempotency-Key`: the key is recorded inside the
//! write's own transaction ([`record_in`], called by [`super::begin_write`]), so a
//! record exists exactly when the write committed, and the answer is stored after
//! ([`store`]). A retry finds the record ([`find`]) instead of writing twice, even
//! when the process died between the commit and the answer.
//!
//! The request's key reaches `begin_write` through a task-local set by the HTTP
//! layer ([`scope`]): no domain function takes it as an argument.

use std::sync::Mutex;

use chrono::{TimeDelta, Utc};
use entity::idempotency_records as records;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, Set,
};

/// How long a key is remembered.
pub const LIFETIME: TimeDelta = TimeDelta::hours(24);

/// One request's key, fingerprint and tenant, and whether a transaction recorded it.
#[derive(Debug)]
pub struct Pending {
    pub tenant: String,
    pub key: String,
    pub fingerprint: String,
    recorded: bool,
}

impl Pending {
    pub fn new(tenant: String, key: String, fingerprint: String) -> Pending {
        Pending {
            tenant,
            key,
            fingerprint,
            recorded: false,
        }
    }
}

tokio::task_local! {
    static PENDING: Mutex<Pending>;
}

/// Runs `request` with `pending` as the key its first write transaction records;
/// answers whether a transaction recorded it.
pub async fn scope<F: Future>(pending: Pending, request: F) -> (F::Output, bool) {
    let cell = Mutex::new(pending);
    PENDING
        .scope(cell, async {
            let output = request.await;
            let recorded = PENDING.with(|p| p.lock().map(|p| p.recorded).unwrap_or(false));
            (output, recorded)
        })
        .await
}

/// Inside a write transaction: records the request's key, once per request. A row
/// for the key that has not expired means a concurrent request with the same key:
/// the insert then changes nothing and the write is refused (its transaction fails).
pub async fn record_in(txn: &impl ConnectionTrait) -> Result<(), DbErr> {
    let Ok(Some((tenant, key, fingerprint))) = PENDING.try_with(|p| {
        let mut p = p.lock().ok()?;
        if p.recorded {
            return None;
        }
        p.recorded = true;
        Some((p.tenant.clone(), p.key.clone(), p.fingerprint.clone()))
    }) else {
        return Ok(());
    };
    let now = Utc::now();
    let row = records::ActiveModel {
        tenant_id: Set(tenant),
        key: Set(key),
        fingerprint: Set(fingerprint),
        status: Set(None),
        body: Set(None),
        created_at: Set(now),
        ..Default::default()
    };
    // An expired row with the same key is taken over; a live one is a conflict.
    let on_conflict = OnConflict::columns([records::Column::TenantId, records::Column::Key])
        .update_columns([
            records::Column::Fingerprint,
            records::Column::Status,
            records::Column::Body,
            records::Column::CreatedAt,
        ])
        .action_and_where(
            Expr::col((records::Entity, records::Column::CreatedAt)).lt(now - LIFETIME),
        )
        .to_owned();
    let inserted = records::Entity::insert(row)
        .on_conflict(on_conflict)
        .exec_without_returning(txn)
        .await?;
    if inserted == 0 {
        return Err(DbErr::RecordNotInserted);
    }
    Ok(())
}

/// The live record of `key` in `tenant`, if any.
pub async fn find(
    db: &DatabaseConnection,
    tenant: &str,
    key: &str,
) -> Result<Option<records::Model>, DbErr> {
    records::Entity::find()
        .filter(records::Column::TenantId.eq(tenant))
        .filter(records::Column::Key.eq(key))
        .filter(records::Column::CreatedAt.gte(Utc::now() - LIFETIME))
        .one(db)
        .await
}

/// Stores the answer of the request that recorded `key`.
pub async fn store(
    db: &DatabaseConnection,
    tenant: &str,
    key: &str,
    status: u16,
    body: String,
) -> Result<(), DbErr> {
    let Some(row) = records::Entity::find()
        .filter(records::Column::TenantId.eq(tenant))
        .filter(records::Column::Key.eq(key))
        .one(db)
        .await?
    else {
        return Ok(());
    };
    let mut row: records::ActiveModel = row.into();
    row.status = Set(Some(i32::from(status)));
    row.body = Set(Some(body));
    row.update(db).await.map(|_| ())
}
