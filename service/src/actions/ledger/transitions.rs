//! Every move of the state machine as data ([`Transition`]: from, to, what is set,
//! the guards, the event's detail) and the one function that makes a move
//! ([`apply`]).
//!
//! A move is one conditional `UPDATE ... WHERE id AND tenant_id AND state = from
//! AND <guards>` whose affected-row count says whether this caller won, then (if it
//! did) the append-only event, then the row read back, in one write transaction.
//! The UPDATE comes first, so on SQLite the write lock is taken up front and
//! concurrent callers queue instead of failing to upgrade a read lock.

use crate::db::idempotency::Pending;
use chrono::{DateTime, Utc};
use entity::{proposal_events, proposals};
use sea_orm::sea_query::{Expr, ExprTrait, SimpleExpr};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr};
use sea_orm::{EntityTrait, QueryFilter, Set};
use serde_json::Value;

use super::read::get;
use super::state::{LedgerError, State, conflict};
use crate::events;
use crate::execute::Outcome;
use crate::releases::signals::{At, Signal};

/// One move: the row must be in `from` and meet every guard; it then takes `to`,
/// `updated_at` and `sets`, and the event (`from` → `to`) carries `detail`. Every
/// move leaves one state, so the event's `from_state` is exact.
pub(super) struct Transition {
    pub from: State,
    pub to: State,
    /// Columns set besides `state` and `updated_at`.
    pub sets: Vec<(proposals::Column, SimpleExpr)>,
    /// Conditions besides the state, in the same UPDATE (so no race can pass them).
    pub guards: Vec<SimpleExpr>,
    pub detail: Option<Value>,
}

fn no_lease() -> SimpleExpr {
    Expr::value(Option::<DateTime<Utc>>::None)
}

fn attempts() -> Expr {
    Expr::col(proposals::Column::Attempts)
}

impl Transition {
    fn plain(from: State, to: State) -> Self {
        Self {
            from,
            to,
            sets: vec![],
            guards: vec![],
            detail: None,
        }
    }

    /// `proposed` → `declined`.
    pub fn decline() -> Self {
        Self::plain(State::Proposed, State::Declined)
    }

    /// `from` (`proposed` or `approved`) → `declined` by a policy decided again at
    /// execution: `ended` as its result and the event's detail.
    pub fn decline_by_policy(from: State, ended: Value) -> Self {
        Self {
            sets: vec![(proposals::Column::Result, Expr::value(ended.clone()))],
            detail: Some(ended),
            ..Self::plain(from, State::Declined)
        }
    }

    /// `proposed` → `approved`, only before `expires_at`.
    pub fn approve(now: DateTime<Utc>) -> Self {
        Self {
            guards: vec![Expr::col(proposals::Column::ExpiresAt).gt(now)],
            ..Self::plain(State::Proposed, State::Approved)
        }
    }

    /// `proposed` → `expired`, unconditionally (an approval's guard already said it is due).
    pub fn expire() -> Self {
        Self::plain(State::Proposed, State::Expired)
    }

    /// `proposed` → `expired`, once `expires_at` has come.
    pub fn expire_due(now: DateTime<Utc>) -> Self {
        Self {
            guards: vec![Expr::col(proposals::Column::ExpiresAt).lte(now)],
            ..Self::expire()
        }
    }

    /// `from` → `executing`: the attempt counted, the lease taken until `lease_until`,
    /// only while an attempt is left and (for a retry) the attempt is still `seen`.
    pub fn claim(from: State, lease_until: DateTime<Utc>, seen: Option<i32>) -> Self {
        let mut guards = vec![attempts().lt(Expr::col(proposals::Column::MaxAttempts))];
        guards.extend(seen.map(|seen| attempts().eq(seen)));
        Self {
            sets: vec![
                (proposals::Column::Attempts, attempts().add(1)),
                (proposals::Column::LeaseUntil, Expr::value(lease_until)),
            ],
            guards,
            ..Self::plain(from, State::Executing)
        }
    }

    /// `executing` → `succeeded` | `failed` with the outcome, only for `attempt`.
    pub fn finish(attempt: i32, outcome: Outcome) -> Self {
        let to = if outcome.success {
            State::Succeeded
        } else {
            State::Failed
        };
        Self {
            sets: vec![
                (
                    proposals::Column::Result,
                    Expr::value(outcome.result.clone()),
                ),
                (proposals::Column::LeaseUntil, no_lease()),
            ],
            guards: vec![attempts().eq(attempt)],
            detail: Some(outcome.result),
            ..Self::plain(State::Executing, to)
        }
    }

    /// `from` → `failed`, not run, with `ended` as the result: only while the
    /// attempts are still `seen` (nothing ran, so they stay as they were).
    pub fn end_unrun(from: State, seen: i32, ended: Value) -> Self {
        Self {
            sets: vec![
                (proposals::Column::Result, Expr::value(ended.clone())),
                (proposals::Column::LeaseUntil, no_lease()),
            ],
            guards: vec![attempts().eq(seen)],
            detail: Some(ended),
            ..Self::plain(from, State::Failed)
        }
    }

    /// `executing` → `failed` with `outcome_unknown`: its lease passed (the sweeper).
    pub fn lost() -> Self {
        let unknown = Outcome::failure(
            "the execution was interrupted; its outcome is unknown",
            false,
        )
        .result;
        Self {
            sets: vec![
                (proposals::Column::OutcomeUnknown, Expr::value(true)),
                (proposals::Column::Result, Expr::value(unknown)),
                (proposals::Column::LeaseUntil, no_lease()),
            ],
            ..Self::plain(State::Executing, State::Failed)
        }
    }
}

/// Which proposal a move is for, who makes it and when.
pub(super) struct Step<'a> {
    pub tenant: &'a str,
    pub id: i32,
    pub actor: &'a str,
    pub now: DateTime<Utc>,
    /// The request's `Idempotency-Key`, recorded by the first transaction that writes.
    pub idempotency: Option<&'a Pending>,
}

/// What [`apply`] did, with the row as it is now.
pub(super) enum Applied {
    /// This caller made the move.
    Moved(proposals::Model),
    /// The row was not in `from`, or a guard refused: nothing changed.
    Stayed(proposals::Model),
}

impl Applied {
    /// The row, moved or not.
    pub fn row(self) -> proposals::Model {
        match self {
            Applied::Moved(row) | Applied::Stayed(row) => row,
        }
    }

    /// The moved row, or the conflict naming the state it stayed in.
    pub fn or_conflict(self) -> Result<proposals::Model, LedgerError> {
        match self {
            Applied::Moved(row) => Ok(row),
            Applied::Stayed(row) => Err(conflict(row)),
        }
    }
}

/// Makes `transition` for `step` if the row allows it; a proposal of another
/// tenant, or none, is [`LedgerError::NotFound`].
pub(super) async fn apply(
    db: &DatabaseConnection,
    step: &Step<'_>,
    transition: Transition,
) -> Result<Applied, LedgerError> {
    let Transition {
        from,
        to,
        sets,
        guards,
        detail,
    } = transition;
    let txn = crate::db::begin_write(db).await?;
    if let Some(pending) = step.idempotency {
        crate::db::idempotency::record(&txn, pending).await?;
    }
    let mut update = proposals::Entity::update_many()
        .col_expr(proposals::Column::State, Expr::value(to.as_str()))
        .col_expr(proposals::Column::UpdatedAt, Expr::value(step.now));
    for (column, value) in sets {
        update = update.col_expr(column, value);
    }
    for guard in guards {
        update = update.filter(guard);
    }
    let moved = update
        .filter(proposals::Column::Id.eq(step.id))
        .filter(proposals::Column::TenantId.eq(step.tenant))
        .filter(proposals::Column::State.eq(from.as_str()))
        .exec(&txn)
        .await?
        .rows_affected;
    let row = get(&txn, step.tenant, step.id).await?;
    if moved != 1 {
        txn.rollback().await?;
        return Ok(Applied::Stayed(row));
    }
    event(
        &txn,
        &row,
        Some(from.as_str()),
        to,
        step.actor,
        detail,
        step.now,
    )
    .await?;
    count_signals(&txn, &row, signals(from, to, step.actor), step.now).await?;
    txn.commit().await?;
    Ok(Applied::Moved(row))
}

/// What a move counts for the proposal's revision: a decision by someone (an
/// approval by `auto` decides nothing), a decline, an execution that ended and
/// whether it failed. A proposal ended unrun (its tool withdrawn) ran nothing and
/// counts nothing.
fn signals(from: State, to: State, actor: &str) -> &'static [Signal] {
    match (from, to) {
        (State::Proposed, State::Declined) => {
            &[Signal::ProposalsDecided, Signal::ProposalsDeclined]
        }
        (State::Proposed, State::Approved) if actor != "auto" => &[Signal::ProposalsDecided],
        (State::Executing, State::Succeeded) => &[Signal::Executions],
        (State::Executing, State::Failed) => &[Signal::Executions, Signal::ExecutionsFailed],
        _ => &[],
    }
}

/// Counts `counted` for the revision `proposal` was validated under, in the
/// move's transaction; a proposal from before revisions were recorded counts for
/// none.
pub(super) async fn count_signals(
    db: &impl ConnectionTrait,
    proposal: &proposals::Model,
    counted: &[Signal],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let Some(revision_id) = proposal.revision_id else {
        return Ok(());
    };
    if counted.is_empty() {
        return Ok(());
    }
    let at = At {
        tenant: &proposal.tenant_id,
        agent_id: proposal.agent_id,
        revision_id,
    };
    crate::releases::signals::count(db, at, counted, now).await
}

/// Appends `proposal`'s event: `from` → `to` by `actor`.
pub(super) async fn event(
    db: &impl ConnectionTrait,
    proposal: &proposals::Model,
    from: Option<&str>,
    to: State,
    actor: &str,
    detail: Option<Value>,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    proposal_events::ActiveModel {
        proposal_id: Set(proposal.id),
        tenant_id: Set(proposal.tenant_id.clone()),
        from_state: Set(from.map(str::to_owned)),
        to_state: Set(to.as_str().to_owned()),
        actor: Set(actor.to_owned()),
        detail: Set(detail),
        at: Set(at),
        ..Default::default()
    }
    .insert(db)
    .await?;
    announce(db, proposal, from, to, actor, at).await
}

/// A proposal's move as a webhook tells it: `proposal.waiting` when it is made,
/// `proposal.decided` when it leaves `proposed` (approved, declined, expired).
async fn announce(
    db: &impl ConnectionTrait,
    proposal: &proposals::Model,
    from: Option<&str>,
    to: State,
    actor: &str,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let waiting = from.is_none() && to == State::Proposed;
    let decided = from == Some(State::Proposed.as_str());
    if !waiting && !decided {
        return Ok(());
    }
    let data = events::Proposal {
        id: proposal.id,
        tenant: proposal.tenant_id.clone(),
        agent: events::agent_name(db, proposal.agent_id).await?,
        tool: proposal.tool_name.clone(),
        conversation: proposal.conversation_id.clone(),
        state: to.as_str().to_owned(),
        actor: actor.to_owned(),
    };
    let event = match waiting {
        true => events::Event::ProposalWaiting(data),
        false => events::Event::ProposalDecided(data),
    };
    events::record(db, at, event).await
}
