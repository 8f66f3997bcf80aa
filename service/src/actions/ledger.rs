//! The proposal ledger: durable state for write tool calls that wait for a user.
//!
//! States: `proposed` → `approved` → `executing` → `succeeded` | `failed`;
//! `proposed` → `declined`; `proposed` → `expired`; `failed` → `executing` (retry);
//! `proposed` | `approved` | `failed` → `failed`, not run, when the tool may no
//! longer run for its agent ([`end_unrun`]).
//! Every move is a `transitions::Transition` (from, to, what is set, the guards, the
//! event's detail) made by `transitions::apply`: one conditional UPDATE whose
//! affected-row count says whether this caller won, plus an append-only event, in
//! one transaction. Only the caller whose UPDATE moved a proposal into `executing`
//! may run its executor: that is the exactly-once guarantee.
//!
//! This file holds the operations callers use; `ledger/` holds the states and
//! refusals (`state.rs`), the moves (`transitions.rs`), reading (`read.rs`) and the
//! sweeper's side (`sweep.rs`); what executors get and give (`Call`, `Outcome`) is
//! `crate::execute`'s.

mod read;
mod state;
mod sweep;
mod transitions;

use crate::db::idempotency::Pending;
use chrono::{DateTime, TimeDelta, Utc};
use entity::proposals;
use sea_orm::{ActiveModelTrait, DatabaseConnection, DbErr, Set};
use serde_json::Value;

use crate::execute::Outcome;
use crate::releases::signals::Signal;

pub use read::{conversation, events, get, pending, pending_by_agent, queue};
pub use state::{
    EXPIRED, LedgerError, NO_ATTEMPTS_LEFT, NOT_RETRYABLE, OUTCOME_UNKNOWN, State, approvable,
    retryable,
};
use state::{conflict, refused};
pub use sweep::{Orphans, orphans, sweep};
use transitions::{Applied, Step, Transition, apply};

/// SHA-256 of the arguments' canonical JSON (object keys sorted), bound to a proposal.
pub fn arguments_hash(arguments: &Value) -> String {
    crate::digest::sha256_hex(crate::digest::sorted(arguments).to_string().as_bytes())
}

/// What a new proposal holds.
#[derive(Clone, Debug)]
pub struct NewProposal {
    pub tenant_id: String,
    pub agent_id: i32,
    pub tool_id: i32,
    pub tool_name: String,
    pub user_id: Option<String>,
    pub conversation_id: String,
    pub message_id: Option<String>,
    pub arguments: Value,
    pub description: String,
    pub preview: Value,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    /// How long it may wait for a decision before it expires.
    pub ttl: TimeDelta,
    pub max_attempts: i32,
    /// The revision the call was validated under; its `tool_calls` counter is
    /// counted in the proposal's transaction.
    pub revision_id: Option<i32>,
    /// JSON [`super::views::DecidedBy`], when a policy decided.
    pub decided_by: Option<String>,
}

/// Records a new proposal in state `proposed`, with its creation event. Only the
/// database can refuse it (a unique index the caller names), so its error is `DbErr`.
pub async fn create(
    db: &DatabaseConnection,
    new: NewProposal,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<proposals::Model, DbErr> {
    let txn = crate::db::begin_write(db).await?;
    let revision_id = new.revision_id;
    let row = proposals::ActiveModel {
        tenant_id: Set(new.tenant_id),
        agent_id: Set(new.agent_id),
        tool_id: Set(new.tool_id),
        tool_name: Set(new.tool_name),
        user_id: Set(new.user_id),
        conversation_id: Set(new.conversation_id),
        message_id: Set(new.message_id),
        arguments_hash: Set(arguments_hash(&new.arguments)),
        arguments: Set(new.arguments),
        description: Set(new.description),
        preview: Set(new.preview),
        state: Set(State::Proposed.as_str().to_owned()),
        attempts: Set(0),
        max_attempts: Set(new.max_attempts),
        result: Set(None),
        outcome_unknown: Set(false),
        idempotency_key: Set(new.idempotency_key),
        request_hash: Set(new.request_hash),
        expires_at: Set(now + new.ttl),
        lease_until: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        revision_id: Set(revision_id),
        decided_by: Set(new.decided_by),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    transitions::event(&txn, &row, None, State::Proposed, actor, None, now).await?;
    transitions::count_signals(&txn, &row, &[Signal::ToolCalls], now).await?;
    txn.commit().await?;
    Ok(row)
}

/// `proposed` → `declined`.
pub async fn decline(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    actor: &str,
    now: DateTime<Utc>,
    idempotency: Option<&Pending>,
) -> Result<proposals::Model, LedgerError> {
    let step = Step {
        tenant,
        id,
        actor,
        now,
        idempotency,
    };
    apply(db, &step, Transition::decline()).await?.or_conflict()
}

/// Ends a proposal whose tool may no longer run for its agent (see
/// `actions::withdrawn`): from the state `seen` was read in (and, for a failed
/// one, the attempt it saw) to `failed`, not retryable, with `reason` as its
/// result's error and the event's detail. Nothing ran: the attempts stay as they
/// were. A proposal moved meanwhile is left alone (409 as it is now).
pub async fn end_unrun(
    db: &DatabaseConnection,
    seen: &proposals::Model,
    actor: &str,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<proposals::Model, LedgerError> {
    let Ok(from) = seen.state.parse::<State>() else {
        return Err(conflict(seen.clone()));
    };
    let ended = Outcome::failure(format!("not run: {reason}"), false).result;
    let step = Step {
        tenant: &seen.tenant_id,
        id: seen.id,
        actor,
        now,
        idempotency: None,
    };
    let end = Transition::end_unrun(from, seen.attempts, ended);
    apply(db, &step, end).await?.or_conflict()
}

/// Declines a proposal that a policy, decided again as it was about to run, now
/// denies: from the state `seen` was read in (`proposed` or `approved`), with
/// `reason` as its result's error and the event's detail. Nothing ran.
pub async fn decline_by_policy(
    db: &DatabaseConnection,
    seen: &proposals::Model,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<proposals::Model, LedgerError> {
    let Ok(from) = seen.state.parse::<State>() else {
        return Err(conflict(seen.clone()));
    };
    let ended = Outcome::failure(format!("declined by policy: {reason}"), false).result;
    let step = Step {
        tenant: &seen.tenant_id,
        id: seen.id,
        actor: "policy",
        now,
        idempotency: None,
    };
    apply(db, &step, Transition::decline_by_policy(from, ended))
        .await?
        .or_conflict()
}

/// What an approval leads to.
#[derive(Debug)]
pub enum Approval {
    /// This caller moved the proposal into `executing` and must run the executor once,
    /// with idempotency key `{id}:{attempts}`.
    Run(proposals::Model),
    /// Already approved, executing or done: returned as it is; nothing runs.
    AsItIs(proposals::Model),
}

/// `proposed` → `approved` → `executing` (two events). Of any number of concurrent
/// approvals exactly one gets [`Approval::Run`]. A proposal left `approved` (a crash
/// between the two steps) is claimed by the next approval. A proposal past its
/// `expires_at` is moved to `expired` and refused: the guard is in the conditional
/// update, so an approval can never race the deadline.
pub async fn approve(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    actor: &str,
    now: DateTime<Utc>,
    lease: TimeDelta,
    idempotency: Option<&Pending>,
) -> Result<Approval, LedgerError> {
    let step = Step {
        tenant,
        id,
        actor,
        now,
        idempotency,
    };
    let row = match apply(db, &step, Transition::approve(now)).await? {
        Applied::Moved(_) => return claim(db, &step, State::Approved, lease, None).await,
        Applied::Stayed(row) => row,
    };
    match row.state.parse() {
        Ok(State::Proposed) => {
            // Only the deadline can have refused it.
            let expired = match apply(db, &step, Transition::expire()).await? {
                Applied::Moved(expired) => expired,
                Applied::Stayed(_) => row,
            };
            Err(refused(expired, Some(EXPIRED)))
        }
        Ok(State::Approved) => claim(db, &step, State::Approved, lease, None).await,
        Ok(State::Executing | State::Succeeded) => Ok(Approval::AsItIs(row)),
        _ => Err(conflict(row)),
    }
}

/// `from` → `executing`, counting the attempt and taking the lease. A retry's claim
/// also needs an attempt left, checked in the same conditional update, so concurrent
/// retries can never run past the limit.
async fn claim(
    db: &DatabaseConnection,
    step: &Step<'_>,
    from: State,
    lease: TimeDelta,
    seen_attempts: Option<i32>,
) -> Result<Approval, LedgerError> {
    let claim = Transition::claim(from, step.now + lease, seen_attempts);
    Ok(match apply(db, step, claim).await? {
        Applied::Moved(row) => Approval::Run(row),
        Applied::Stayed(row) => Approval::AsItIs(row),
    })
}

/// `failed` → `executing`, while attempts remain, the outcome is known and the
/// failure was retryable (see [`retryable`]): a retry of the attempt that failed last.
pub async fn retry(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    actor: &str,
    now: DateTime<Utc>,
    lease: TimeDelta,
) -> Result<proposals::Model, LedgerError> {
    let seen = get(db, tenant, id).await?.attempts;
    let claim = Lease {
        lease,
        idempotency: None,
    };
    retry_attempt(db, tenant, id, seen, actor, now, claim).await
}

/// How a retry claims its attempt: for how long, and the request's key to record.
pub struct Lease<'a> {
    pub lease: TimeDelta,
    pub idempotency: Option<&'a Pending>,
}

/// A retry of attempt `seen`, the one the caller saw fail. The claim is conditional
/// on it, so any number of concurrent retries of one failure run it once: the others
/// find the attempt moved on and get 409.
pub async fn retry_attempt(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    seen: i32,
    actor: &str,
    now: DateTime<Utc>,
    Lease { lease, idempotency }: Lease<'_>,
) -> Result<proposals::Model, LedgerError> {
    let row = get(db, tenant, id).await?;
    retryable(&row)?;
    if row.attempts != seen {
        return Err(conflict(row));
    }
    let step = Step {
        tenant,
        id,
        actor,
        now,
        idempotency,
    };
    match claim(db, &step, State::Failed, lease, Some(seen)).await? {
        Approval::Run(row) => Ok(row),
        // Another retry won, or the attempts ran out meanwhile.
        Approval::AsItIs(row) => Err(match retryable(&row) {
            Err(refusal) => refusal,
            Ok(()) => conflict(row),
        }),
    }
}

/// Refuses an approval that cannot happen now (see [`approvable`]); a proposal
/// past its deadline is moved to `expired` on the way.
pub async fn check_approvable(
    db: &DatabaseConnection,
    row: &proposals::Model,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<(), LedgerError> {
    match approvable(row, now) {
        Err(LedgerError::Conflict {
            reason: Some(EXPIRED),
            ..
        }) => {
            let step = Step {
                tenant: &row.tenant_id,
                id: row.id,
                actor,
                now,
                idempotency: None,
            };
            let expired = apply(db, &step, Transition::expire_due(now)).await?;
            Err(refused(expired.row(), Some(EXPIRED)))
        }
        other => other,
    }
}

/// `executing` → `succeeded` | `failed`, only for the attempt that was claimed.
pub async fn finish(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    attempt: i32,
    outcome: Outcome,
    now: DateTime<Utc>,
) -> Result<proposals::Model, LedgerError> {
    let step = Step {
        tenant,
        id,
        actor: "executor",
        now,
        idempotency: None,
    };
    let finish = Transition::finish(attempt, outcome);
    apply(db, &step, finish).await?.or_conflict()
}
