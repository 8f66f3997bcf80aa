//! The proposal ledger: durable state for write tool calls that wait for a user.
//!
//! States: `proposed` → `approved` → `executing` → `succeeded` | `failed`;
//! `proposed` → `declined`; `proposed` → `expired`; `failed` → `executing` (retry);
//! `proposed` | `approved` | `failed` → `failed`, not run, when the tool may no
//! longer run for its agent ([`end_unrun`]).
//! Every transition is one conditional `UPDATE ... WHERE id AND tenant_id AND state IN
//! (...)` whose affected-row count says whether this caller won, plus an append-only
//! event, in one transaction. The UPDATE comes first in its transaction, so on SQLite
//! the write lock is taken up front and concurrent callers queue instead of failing
//! to upgrade a read lock. Only the caller whose UPDATE moved a proposal into
//! `executing` may run its executor: that is the exactly-once guarantee.
//!
//! The HTTP endpoints and the executors that use this arrive with the rest of the
//! proposals issue; this module is the ledger they stand on.

use chrono::{DateTime, TimeDelta, Utc};
use entity::{proposal_events, proposals};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, QueryOrder, Set,
};
use serde::Serialize;
use serde_json::Value;

crate::closed_set! {
    /// A proposal's state.
    pub enum State as "proposal state" {
        Proposed = "proposed",
        Approved = "approved",
        Executing = "executing",
        Succeeded = "succeeded",
        Failed = "failed",
        Declined = "declined",
        Expired = "expired",
    }
}

/// Why a ledger call did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No such proposal for this tenant (another tenant's proposal looks the same).
    #[error("no such proposal")]
    NotFound,
    /// The proposal is in a state this call cannot move it from, or a guard refused
    /// the move (`reason` says which: expired, not retryable, no attempts left).
    #[error("the proposal is {state}")]
    Conflict {
        state: String,
        reason: Option<&'static str>,
        proposal: Box<proposals::Model>,
    },
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// SHA-256 of the arguments' canonical JSON (object keys sorted), bound to a proposal.
pub fn arguments_hash(arguments: &Value) -> String {
    // serde_json's Map keeps keys sorted (no `preserve_order`), so this is canonical.
    crate::auth::keys::hash_bytes(arguments.to_string().as_bytes())
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
}

async fn event(
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
    .await
    .map(drop)
}

/// Records a new proposal in state `proposed`, with its creation event.
pub async fn create(
    db: &DatabaseConnection,
    new: NewProposal,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<proposals::Model, DbErr> {
    let txn = crate::db::begin_write(db).await?;
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
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    event(&txn, &row, None, State::Proposed, actor, None, now).await?;
    txn.commit().await?;
    Ok(row)
}

/// A proposal of this tenant.
pub async fn get(
    db: &impl ConnectionTrait,
    tenant: &str,
    id: i32,
) -> Result<proposals::Model, LedgerError> {
    proposals::Entity::find_by_id(id)
        .filter(proposals::Column::TenantId.eq(tenant))
        .one(db)
        .await?
        .ok_or(LedgerError::NotFound)
}

/// A proposal's events, oldest first.
pub async fn events(
    db: &impl ConnectionTrait,
    tenant: &str,
    id: i32,
) -> Result<Vec<proposal_events::Model>, LedgerError> {
    get(db, tenant, id).await?;
    Ok(proposal_events::Entity::find()
        .filter(proposal_events::Column::ProposalId.eq(id))
        .filter(proposal_events::Column::TenantId.eq(tenant))
        .order_by_asc(proposal_events::Column::Id)
        .all(db)
        .await?)
}

/// Extra columns a transition sets besides `state` and `updated_at`.
type Set_ = Vec<(proposals::Column, sea_orm::sea_query::SimpleExpr)>;

/// The conditional move `from` → `to`. `Ok(Some(row))` when this caller made it;
/// `Ok(None)` when the proposal exists but was not in `from`.
/// Which proposal a transition is for, who makes it and when.
struct Step<'a> {
    tenant: &'a str,
    id: i32,
    actor: &'a str,
    now: DateTime<Utc>,
}

async fn transition(
    db: &DatabaseConnection,
    step: &Step<'_>,
    from: &[State],
    to: State,
    extra: Set_,
    guards: Vec<sea_orm::sea_query::SimpleExpr>,
    detail: Option<Value>,
) -> Result<Option<proposals::Model>, LedgerError> {
    let Step {
        tenant,
        id,
        actor,
        now,
    } = *step;
    let txn = crate::db::begin_write(db).await?;
    let mut update = proposals::Entity::update_many()
        .col_expr(proposals::Column::State, Expr::value(to.as_str()))
        .col_expr(proposals::Column::UpdatedAt, Expr::value(now));
    for (column, value) in extra {
        update = update.col_expr(column, value);
    }
    for guard in guards {
        update = update.filter(guard);
    }
    let moved = update
        .filter(proposals::Column::Id.eq(id))
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::State.is_in(from.iter().map(|s| s.as_str())))
        .exec(&txn)
        .await?
        .rows_affected;
    let row = get(&txn, tenant, id).await?;
    if moved != 1 {
        txn.rollback().await?;
        return Ok(None);
    }
    // The previous state is whichever of `from` the row was in; with one element it is exact.
    let previous = (from.len() == 1).then(|| from[0].as_str());
    event(&txn, &row, previous, to, actor, detail, now).await?;
    txn.commit().await?;
    Ok(Some(row))
}

fn conflict(row: proposals::Model) -> LedgerError {
    refused(row, None)
}

fn refused(row: proposals::Model, reason: Option<&'static str>) -> LedgerError {
    LedgerError::Conflict {
        state: row.state.clone(),
        reason,
        proposal: Box::new(row),
    }
}

/// Why an approval of `row` cannot happen now, if it cannot: a proposal past its
/// `expires_at` is expired, and a decided one (declined, failed, expired) stays so.
/// Approved, executing and succeeded proposals may be approved again (answered as
/// they are, or, if a crash left one `approved`, claimed).
pub fn approvable(row: &proposals::Model, now: DateTime<Utc>) -> Result<(), LedgerError> {
    match row.state.parse() {
        Ok(State::Proposed) if row.expires_at <= now => Err(refused(row.clone(), Some(EXPIRED))),
        Ok(State::Proposed | State::Approved | State::Executing | State::Succeeded) => Ok(()),
        _ => Err(conflict(row.clone())),
    }
}

/// Why a retry of `row` cannot happen, if it cannot: only a failed proposal with
/// attempts left, whose outcome is known and whose failure a retry may fix.
pub fn retryable(row: &proposals::Model) -> Result<(), LedgerError> {
    let not_retryable = row
        .result
        .as_ref()
        .and_then(|r| r.get("retryable"))
        .and_then(Value::as_bool)
        == Some(false);
    let reason = if row.state.parse() != Ok(State::Failed) {
        return Err(conflict(row.clone()));
    } else if row.outcome_unknown {
        Some(OUTCOME_UNKNOWN)
    } else if not_retryable {
        Some(NOT_RETRYABLE)
    } else if row.attempts >= row.max_attempts {
        Some(NO_ATTEMPTS_LEFT)
    } else {
        None
    };
    match reason {
        Some(reason) => Err(refused(row.clone(), Some(reason))),
        None => Ok(()),
    }
}

/// The reasons a guard gives.
pub const EXPIRED: &str = "it expired before it was approved";
pub const OUTCOME_UNKNOWN: &str =
    "its last outcome is unknown (it may have run): check the backend before calling again";
pub const NOT_RETRYABLE: &str = "its last attempt failed in a way a retry cannot fix";
pub const NO_ATTEMPTS_LEFT: &str = "it has no attempts left";

/// `proposed` → `declined`.
pub async fn decline(
    db: &DatabaseConnection,
    tenant: &str,
    id: i32,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<proposals::Model, LedgerError> {
    match transition(
        db,
        &Step {
            tenant,
            id,
            actor,
            now,
        },
        &[State::Proposed],
        State::Declined,
        vec![],
        vec![],
        None,
    )
    .await?
    {
        Some(row) => Ok(row),
        None => Err(conflict(get(db, tenant, id).await?)),
    }
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
    let (tenant, id) = (seen.tenant_id.as_str(), seen.id);
    let Ok(from) = seen.state.parse::<State>() else {
        return Err(conflict(seen.clone()));
    };
    let ended = Outcome::failure(format!("not run: {reason}"), false).result;
    let extra: Set_ = vec![
        (proposals::Column::Result, Expr::value(ended.clone())),
        (
            proposals::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        ),
    ];
    let same_attempt = vec![Expr::col(proposals::Column::Attempts).eq(seen.attempts)];
    let step = Step {
        tenant,
        id,
        actor,
        now,
    };
    let moved = transition(
        db,
        &step,
        &[from],
        State::Failed,
        extra,
        same_attempt,
        Some(ended),
    )
    .await?;
    match moved {
        Some(row) => Ok(row),
        None => Err(conflict(get(db, tenant, id).await?)),
    }
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
) -> Result<Approval, LedgerError> {
    let step = Step {
        tenant,
        id,
        actor,
        now,
    };
    let unexpired = Expr::col(proposals::Column::ExpiresAt).gt(now);
    let moved = transition(
        db,
        &step,
        &[State::Proposed],
        State::Approved,
        vec![],
        vec![unexpired],
        None,
    );
    if moved.await?.is_some() {
        return claim(db, &step, State::Approved, lease, None).await;
    }
    let row = get(db, tenant, id).await?;
    match row.state.parse() {
        Ok(State::Proposed) => {
            // Only the deadline can have refused it.
            let expired = transition(
                db,
                &step,
                &[State::Proposed],
                State::Expired,
                vec![],
                vec![],
                None,
            )
            .await?;
            Err(refused(expired.unwrap_or(row), Some(EXPIRED)))
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
    let (tenant, id, now) = (step.tenant, step.id, step.now);
    let extra: Set_ = vec![
        (
            proposals::Column::Attempts,
            Expr::col(proposals::Column::Attempts).add(1),
        ),
        (proposals::Column::LeaseUntil, Expr::value(now + lease)),
    ];
    let mut guards =
        vec![Expr::col(proposals::Column::Attempts).lt(Expr::col(proposals::Column::MaxAttempts))];
    if let Some(seen) = seen_attempts {
        guards.push(Expr::col(proposals::Column::Attempts).eq(seen));
    }
    match transition(db, step, &[from], State::Executing, extra, guards, None).await? {
        Some(row) => Ok(Approval::Run(row)),
        None => Ok(Approval::AsItIs(get(db, tenant, id).await?)),
    }
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
    retry_attempt(db, tenant, id, seen, actor, now, lease).await
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
    lease: TimeDelta,
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
            };
            let due = Expr::col(proposals::Column::ExpiresAt).lte(now);
            let expired = transition(
                db,
                &step,
                &[State::Proposed],
                State::Expired,
                vec![],
                vec![due],
                None,
            )
            .await?;
            let now_row = match expired {
                Some(row) => row,
                None => get(db, &row.tenant_id, row.id).await?,
            };
            Err(refused(now_row, Some(EXPIRED)))
        }
        other => other,
    }
}

/// One tool call to carry out, with its context.
#[derive(Clone, Debug)]
pub struct Call {
    pub tenant: String,
    pub agent_id: i32,
    pub user_id: Option<String>,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// `{proposal_id}:{attempt}`: executors must treat a repeat as the same call.
    pub idempotency_key: String,
    /// The agent's name, for the connector's context.
    pub agent: String,
    pub conversation_id: String,
    pub proposal_id: i32,
    pub attempt: i32,
}

/// An execution's result.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub success: bool,
    /// The executor's structured result, or a [`Failure`].
    pub result: Value,
}

/// A failed execution's result: what went wrong (sanitised: no bodies, URLs or
/// secrets), and whether running it again may help.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    pub error: String,
    pub retryable: bool,
}

impl Outcome {
    pub fn failure(error: impl Into<String>, retryable: bool) -> Self {
        let failure = Failure {
            error: error.into(),
            retryable,
        };
        Self {
            success: false,
            result: serde_json::to_value(failure).unwrap_or(Value::Null),
        }
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
    let to = if outcome.success {
        State::Succeeded
    } else {
        State::Failed
    };
    let txn = crate::db::begin_write(db).await?;
    let moved = proposals::Entity::update_many()
        .col_expr(proposals::Column::State, Expr::value(to.as_str()))
        .col_expr(
            proposals::Column::Result,
            Expr::value(outcome.result.clone()),
        )
        .col_expr(
            proposals::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(proposals::Column::UpdatedAt, Expr::value(now))
        .filter(proposals::Column::Id.eq(id))
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::State.eq(State::Executing.as_str()))
        .filter(proposals::Column::Attempts.eq(attempt))
        .exec(&txn)
        .await?
        .rows_affected;
    let row = get(&txn, tenant, id).await?;
    if moved != 1 {
        txn.rollback().await?;
        return Err(conflict(row));
    }
    event(
        &txn,
        &row,
        Some(State::Executing.as_str()),
        to,
        "executor",
        Some(outcome.result),
        now,
    )
    .await?;
    txn.commit().await?;
    Ok(row)
}

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
) -> Result<Vec<proposals::Model>, DbErr> {
    use sea_orm::Condition;
    let executing = Condition::all().add(proposals::Column::State.eq(State::Executing.as_str()));
    let executing = match override_lease {
        Some(lease) => executing.add(proposals::Column::UpdatedAt.lt(now - lease)),
        None => executing.add(proposals::Column::LeaseUntil.lt(now)),
    };
    let approved = Condition::all()
        .add(proposals::Column::State.eq(State::Approved.as_str()))
        .add(proposals::Column::UpdatedAt.lt(now - override_lease.unwrap_or(lease)));
    proposals::Entity::find()
        .filter(Condition::any().add(executing).add(approved))
        .order_by_asc(proposals::Column::Id)
        .all(db)
        .await
}

/// Crash safety and expiry, for every tenant: an `executing` proposal past its lease
/// is failed with `outcome_unknown` (never re-run automatically); an `approved` one
/// older than `lease` is returned, for the caller to claim and run (it never ran: a
/// claim is what starts a run); a `proposed` one past `expires_at` expires.
pub async fn sweep(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    lease: TimeDelta,
) -> Result<Orphans, DbErr> {
    let mut orphans = Orphans::default();
    let dead = proposals::Entity::find()
        .filter(proposals::Column::State.eq(State::Executing.as_str()))
        .filter(proposals::Column::LeaseUntil.lt(now))
        .all(db)
        .await?;
    for row in dead {
        let unknown = Outcome::failure(
            "the execution was interrupted; its outcome is unknown",
            false,
        )
        .result;
        let extra: Set_ = vec![
            (proposals::Column::OutcomeUnknown, Expr::value(true)),
            (proposals::Column::Result, Expr::value(unknown)),
            (
                proposals::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            ),
        ];
        let moved = transition(
            db,
            &Step {
                tenant: &row.tenant_id,
                id: row.id,
                actor: "sweeper",
                now,
            },
            &[State::Executing],
            State::Failed,
            extra,
            vec![],
            None,
        )
        .await
        .map_err(|e| match e {
            LedgerError::Db(e) => e,
            other => DbErr::Custom(other.to_string()),
        })?;
        if moved.is_some() {
            orphans.failed.push(row.id);
        }
    }
    orphans.approved = proposals::Entity::find()
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
    for row in due {
        let moved = transition(
            db,
            &Step {
                tenant: &row.tenant_id,
                id: row.id,
                actor: "sweeper",
                now,
            },
            &[State::Proposed],
            State::Expired,
            vec![],
            vec![],
            None,
        )
        .await
        .map_err(|e| match e {
            LedgerError::Db(e) => e,
            other => DbErr::Custom(other.to_string()),
        })?;
        if moved.is_some() {
            orphans.expired.push(row.id);
        }
    }
    Ok(orphans)
}
