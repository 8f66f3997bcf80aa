//! The sweeper's side of the ledger, for every tenant: what a crash or a deadline
//! left behind ([`orphans`], changing nothing) and the sweep that ends it ([`sweep`]).

use chrono::{DateTime, TimeDelta, Utc};
use entity::proposals;
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder,
};
use serde::Serialize;

use super::state::{LedgerError, State};
use super::transitions::{Applied, Step, Transition, apply};

/// Proposals found orphaned by [`sweep`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Orphans {
    /// Were `executing` past their lease: now `failed` with `outcome_unknown`.
    pub failed: Vec<i32>,
    /// Are `approved` but were never claimed within a lease (a crash between approval
    /// and claim): `(tenant, id)`, for the sweeper to claim and run.
    pub approved: Vec<(String, i32)>,
    /// Were `proposed` past their expiry: now `expired`.
    pub expired: Vec<i32>,
}

/// Orphans, changing nothing: `executing` proposals past their lease (stamped at
/// the claim from the executor's timeout), and `approved` ones never claimed within
/// `lease`. With `override_lease`, both states are judged by their last change
/// (`updated_at`) against it instead: for an operator who knows the process is dead.
pub async fn orphans(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    lease: TimeDelta,
    override_lease: Option<TimeDelta>,
) -> Result<Vec<proposals::Model>, LedgerError> {
    let executing = Condition::all().add(proposals::Column::State.eq(State::Executing.as_str()));
    let executing = match override_lease {
        Some(lease) => executing.add(proposals::Column::UpdatedAt.lt(now - lease)),
        None => executing.add(proposals::Column::LeaseUntil.lt(now)),
    };
    let approved = Condition::all()
        .add(proposals::Column::State.eq(State::Approved.as_str()))
        .add(proposals::Column::UpdatedAt.lt(now - override_lease.unwrap_or(lease)));
    Ok(proposals::Entity::find()
        .filter(Condition::any().add(executing).add(approved))
        .order_by_asc(proposals::Column::Id)
        .all(db)
        .await?)
}

/// Crash safety and expiry, for every tenant: an `executing` proposal past its lease
/// is failed with `outcome_unknown` (never re-run automatically); an `approved` one
/// older than `lease` is returned, for the caller to claim and run (it never ran: a
/// claim is what starts a run); a `proposed` one past `expires_at` expires.
pub async fn sweep(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    lease: TimeDelta,
) -> Result<Orphans, LedgerError> {
    let dead = proposals::Entity::find()
        .filter(proposals::Column::State.eq(State::Executing.as_str()))
        .filter(proposals::Column::LeaseUntil.lt(now))
        .all(db)
        .await?;
    let failed = each(db, dead, now, Transition::lost).await?;
    let approved = proposals::Entity::find()
        .filter(proposals::Column::State.eq(State::Approved.as_str()))
        .filter(proposals::Column::UpdatedAt.lt(now - lease))
        .all(db)
        .await?
        .into_iter()
        .map(|row| (row.tenant_id, row.id))
        .collect();
    let due = proposals::Entity::find()
        .filter(proposals::Column::State.eq(State::Proposed.as_str()))
        .filter(proposals::Column::ExpiresAt.lt(now))
        .all(db)
        .await?;
    let expired = each(db, due, now, Transition::expire).await?;
    Ok(Orphans {
        failed,
        approved,
        expired,
    })
}

/// Makes `transition` on each of `rows` as the sweeper; the ids it moved (another
/// process may have moved some first).
async fn each(
    db: &DatabaseConnection,
    rows: Vec<proposals::Model>,
    now: DateTime<Utc>,
    transition: fn() -> Transition,
) -> Result<Vec<i32>, LedgerError> {
    let mut moved = Vec::new();
    for row in rows {
        let step = Step {
            tenant: &row.tenant_id,
            id: row.id,
            actor: "sweeper",
            now,
            idempotency: None,
        };
        if let Applied::Moved(_) = apply(db, &step, transition()).await? {
            moved.push(row.id);
        }
    }
    Ok(moved)
}
