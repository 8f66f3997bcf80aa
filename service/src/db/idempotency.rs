//! Admin writes sent with an `Idempotency-Key`: the key is recorded inside the
//! write's own transaction ([`record_in`], called by [`super::begin_write`]), so a
//! record exists exactly when the write committed, and the answer is stored after
//! ([`store`]). A retry finds the record ([`find`]) instead of writing twice, even
//! when the process died between the commit and the answer.
//!
//! The request's key reaches the write that records it explicitly where the
//! write runs apart from the request's task (a proposal's approve, decline and
//! retry, whose claim and execution run in a task of their own so a dropped
//! connection cannot cut them short): the handler takes the [`Pending`] key from
//! the request's extensions and hands it down to [`record`]. The other writes
//! still find it through a task-local set by the HTTP layer ([`scope`]), which
//! [`super::begin_write`] reads; both share one [`Pending`], so a request records
//! its key once, whichever way it is reached.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
    recorded: AtomicBool,
}

impl Pending {
    pub fn new(tenant: String, key: String, fingerprint: String) -> Arc<Pending> {
        Arc::new(Pending {
            tenant,
            key,
            fingerprint,
            recorded: AtomicBool::new(false),
        })
    }

    /// Whether a write transaction recorded the key.
    pub fn recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }
}

tokio::task_local! {
    static PENDING: Arc<Pending>;
}

/// Runs `request` with `pending` as the key its first write transaction records.
pub async fn scope<F: Future>(pending: Arc<Pending>, request: F) -> F::Output {
    PENDING.scope(pending, request).await
}

/// Inside a write transaction: records the request's key (the task-local one),
/// once per request.
pub async fn record_in(txn: &impl ConnectionTrait) -> Result<(), DbErr> {
    match PENDING.try_with(Arc::clone) {
        Ok(pending) => record(txn, &pending).await,
        Err(_) => Ok(()),
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
    let now = Utc::now();
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
