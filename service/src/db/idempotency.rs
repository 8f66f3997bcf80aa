//! Admin writes sent with an `Idempotency-Key`: the key is recorded inside the
//! write's own transaction ([`record`]), so a
//! record exists exactly when the write committed, and the answer is stored after
//! ([`store`]). A retry finds the record ([`find`]) instead of writing twice, even
//! when the process died between the commit and the answer.
//!
//! The request's key is an explicit input: the HTTP layer puts the [`Pending`] key
//! in the request's extensions, the handler hands it to the domain function as
//! `Option<&Pending>`, and that function records it in its own write transaction
//! ([`record_if`], or `registry::guard::Write::keyed`). A request records its key
//! once, in whichever transaction reaches it first.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
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
    /// When the request came (the server's clock): the record's time.
    pub at: DateTime<Utc>,
    recorded: AtomicBool,
}

impl Pending {
    pub fn new(
        tenant: String,
        key: String,
        fingerprint: String,
        at: DateTime<Utc>,
    ) -> Arc<Pending> {
        Arc::new(Pending {
            tenant,
            key,
            fingerprint,
            at,
            recorded: AtomicBool::new(false),
        })
    }

    /// Whether a write transaction recorded the key.
    pub fn recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }
}

/// Inside a write transaction: records the request's key when it sent one (see
/// [`record`]).
pub async fn record_if(txn: &impl ConnectionTrait, key: Option<&Pending>) -> Result<(), DbErr> {
    match key {
        Some(pending) => record(txn, pending).await,
        None => Ok(()),
    }
}

/// Inside a write transaction: records `pending`, once per request. A row for
/// the key that has not expired means a concurrent request with the same key:
/// the insert then changes nothing and the write is refused (its transaction
/// fails). Should the transaction roll back after all, the flag stays set and the
/// request's answer is simply not stored (its record never committed).
pub async fn record(txn: &impl ConnectionTrait, pending: &Pending) -> Result<(), DbErr> {
    if pending.recorded.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let now = pending.at;
    let row = records::ActiveModel {
        tenant_id: Set(pending.tenant.clone()),
        key: Set(pending.key.clone()),
        fingerprint: Set(pending.fingerprint.clone()),
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
    now: DateTime<Utc>,
) -> Result<Option<records::Model>, DbErr> {
    records::Entity::find()
        .filter(records::Column::TenantId.eq(tenant))
        .filter(records::Column::Key.eq(key))
        .filter(records::Column::CreatedAt.gte(now - LIFETIME))
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
