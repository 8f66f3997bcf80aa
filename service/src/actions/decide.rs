//! An approver's side of the ledger: read proposals, approve (the call runs once),
//! decline, retry a failure. The tenant is always the caller's key's; another
//! tenant's proposal is not found.

use crate::vocab::Clock;
use std::sync::Arc;

use crate::db::idempotency::Pending;
use chrono::{DateTime, Utc};
use entity::{agent_configurations, proposals, tools};
use sea_orm::{DatabaseConnection, EntityTrait};
use serde::Serialize;

use super::Runner;
pub use super::ledger::State;
use super::ledger::{self, Approval, LedgerError};
use super::views::{ConversationProposals, EventView, ProposalDetail, ProposalView};
use crate::auth::Principal;
use crate::cache::Generation;
use crate::error::{Error, Kind, Result, check_id};
use crate::execute::executors::{EXECUTION_TIMEOUT, Executors, NotRunnable};
use crate::execute::{Call, Outcome};

/// The details of a conflict: the state, why (when a guard refused), and the
/// proposal as it is.
#[derive(Debug, Serialize)]
struct InState {
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    proposal: ProposalView,
}

impl From<LedgerError> for Error {
    fn from(error: LedgerError) -> Self {
        match error {
            LedgerError::NotFound => Error::not_found("no such proposal"),
            LedgerError::Conflict {
                state,
                reason,
                proposal,
            } => {
                let message = match reason {
                    Some(reason) => format!("the proposal is {state}: {reason}"),
                    None => {
                        format!("the proposal is {state}; that action is not possible from there")
                    }
                };
                let proposal = (*proposal).into();
                Error::conflict(message).with_details(InState {
                    state,
                    reason: reason.map(str::to_owned),
                    proposal,
                })
            }
            LedgerError::Db(e) => e.into(),
        }
    }
}

/// Runs `work` in a task of its own and waits for it: if the request that started
/// it is dropped (the client went away), the claim, the call and the recording of
/// its outcome still finish, so no outcome is lost.
pub async fn in_task<T: Send + 'static>(
    work: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    tokio::spawn(work).await.map_err(Error::internal)?
}

/// The code of a 409 for a proposal ended unrun because its tool may no longer
/// run for its agent.
pub const TOOL_UNAVAILABLE: &str = "tool_unavailable";

/// Ends `row` unrun when its tool may no longer run for its agent (switched off,
/// unlinked, deleted, or the agent deleted): `failed`, not retryable, the reason
/// in its result, an event by `actor`; answered 409 `tool_unavailable` with the
/// proposal as it now is. Nothing runs.
async fn ensure_runnable(
    db: &DatabaseConnection,
    row: &proposals::Model,
    actor: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    let Some(reason) = super::withdrawn::reason(db, row).await? else {
        return Ok(());
    };
    let ended = ledger::end_unrun(db, row, actor, &reason, now).await?;
    let message = format!("the proposal ended without running: {reason}");
    Err(
        Error::new(Kind::Conflict, TOOL_UNAVAILABLE, message).with_details(InState {
            state: ended.state.clone(),
            reason: Some(reason),
            proposal: ended.into(),
        }),
    )
}

/// The code of a 409 for a proposal a policy, decided again before it ran, denies.
pub const DECLINED_BY_POLICY: &str = "declined_by_policy";

/// Declines `row` when the policy `production` serves its user now denies it
/// (see [`super::redecide`]): 409 `declined_by_policy` with the proposal as it
/// now is (a failed one's retry ends it failed, not retryable). Nothing runs.
async fn ensure_permitted(
    db: &DatabaseConnection,
    row: &proposals::Model,
    now: DateTime<Utc>,
) -> Result<()> {
    let Some(by) = super::redecide::denied_now(db, row).await? else {
        return Ok(());
    };
    let reason = by
        .reason
        .clone()
        .unwrap_or_else(|| "a policy forbids this call".to_owned());
    // A failed proposal's retry ends it failed for good (a run happened); one that
    // never ran is declined.
    let ended = match row.state.parse::<State>() {
        Ok(State::Failed) => {
            let why = format!("declined by policy: {reason}");
            ledger::end_unrun(db, row, "policy", &why, now).await?
        }
        _ => ledger::decline_by_policy(db, row, &reason, now).await?,
    };
    let message = format!(
        "the proposal did not run: revision {}'s policy denies it now: {reason}",
        by.revision
    );
    Err(
        Error::new(Kind::Conflict, DECLINED_BY_POLICY, message).with_details(InState {
            state: ended.state.clone(),
            reason: Some(reason),
            proposal: ended.into(),
        }),
    )
}

/// 424: the tool has no executor now; a proposal stays as it is.
pub fn not_connected(e: NotRunnable) -> Error {
    Error::new(Kind::NotRunnable, "not_connected", e.to_string())
}

/// A proposal's tool type, as stored (`""` if the tool row is gone).
async fn tool_type(db: &DatabaseConnection, tool_id: i32) -> Result<String> {
    Ok(tools::Entity::find_by_id(tool_id)
        .one(db)
        .await?
        .map(|t| t.tool_type)
        .unwrap_or_default())
}

/// Runs an approved proposal's claimed attempt with the executors the request
/// checked, and records the outcome.
pub async fn execute(
    db: &DatabaseConnection,
    generation: &Generation,
    clock: &dyn Clock,
    executors: &Executors,
    claimed: proposals::Model,
    tool_type: &str,
) -> Result<proposals::Model> {
    let refused = if let Err(e) = executors.runnable(&claimed.tool_name, tool_type) {
        // Claimed but not runnable: fail it, retryable (the tool may be connected later).
        Some(Outcome::failure(e.to_string(), true))
    } else if ledger::arguments_hash(&claimed.arguments) != claimed.arguments_hash {
        Some(Outcome::failure(
            "the arguments changed after they were proposed",
            false,
        ))
    } else {
        None
    };
    let outcome = match refused {
        Some(failure) => failure,
        None => {
            let agent = agent_configurations::Entity::find_by_id(claimed.agent_id)
                .one(db)
                .await?
                .map(|a| a.name)
                .unwrap_or_default();
            let call = Call {
                tenant: claimed.tenant_id.clone(),
                agent_id: claimed.agent_id,
                user_id: claimed.user_id.clone(),
                tool: claimed.tool_name.clone(),
                arguments: claimed.arguments.clone(),
                idempotency_key: format!("{}:{}", claimed.id, claimed.attempts),
                agent,
                conversation_id: claimed.conversation_id.clone(),
                proposal_id: claimed.id,
                attempt: claimed.attempts,
            };
            executors
                .run(db, call, EXECUTION_TIMEOUT, clock.now())
                .await
        }
    };
    let (tenant, id, attempt) = (&claimed.tenant_id, claimed.id, claimed.attempts);
    let done = ledger::finish(db, tenant, id, attempt, outcome, clock.now()).await?;
    // A builtin may have changed what prompts render (update_instructions bumps the generation).
    if let Ok(current) = crate::db::generation::current(db).await {
        generation.observe(current);
    }
    Ok(done)
}

/// A proposal and its events.
pub async fn get(db: &DatabaseConnection, who: &Principal, id: i32) -> Result<ProposalDetail> {
    let row = ledger::get(db, who.tenant(), id).await?;
    let events = ledger::events(db, who.tenant(), id).await?;
    Ok(ProposalDetail {
        proposal: row.into(),
        events: events.into_iter().map(EventView::from).collect(),
    })
}

/// How many proposals a page of a conversation holds when not asked, and at most.
pub const PAGE_DEFAULT: u64 = 50;
pub const PAGE_MAX: u64 = 200;

/// Which page of a conversation's proposals: up to `limit` ([`PAGE_DEFAULT`] when
/// absent, at most [`PAGE_MAX`]) of those with an id above `after`.
#[derive(Debug, Default)]
pub struct Page {
    pub limit: Option<u64>,
    pub after: Option<i32>,
}

/// A page of a conversation's proposals in the caller's tenant, oldest first (by
/// id, which never changes, so pages neither skip nor repeat a proposal), with the
/// `after` of the next page when there is one.
pub async fn conversation(
    db: &DatabaseConnection,
    who: &Principal,
    conversation: &str,
    page: Page,
) -> Result<ConversationProposals> {
    check_id("conversation_id", conversation)?;
    let limit = page.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(Error::invalid(format!("limit must be 1 to {PAGE_MAX}")));
    }
    let (rows, next) =
        ledger::conversation(db, who.tenant(), conversation, limit, page.after).await?;
    Ok(ConversationProposals {
        conversation_id: conversation.to_owned(),
        proposals: rows.into_iter().map(ProposalView::from).collect(),
        next,
    })
}

/// The most proposals [`queue`] lists.
pub const QUEUE_LIMIT: u64 = 200;

/// The caller's tenant's proposals, newest first: those in `state` when given,
/// otherwise every state; at most [`QUEUE_LIMIT`].
pub async fn queue(
    db: &DatabaseConnection,
    who: &Principal,
    only: Option<State>,
) -> Result<Vec<ProposalView>> {
    let rows = ledger::queue(db, who.tenant(), only, QUEUE_LIMIT).await?;
    Ok(rows.into_iter().map(ProposalView::from).collect())
}

/// How many of the caller's tenant's proposals wait for a decision.
pub async fn pending(db: &DatabaseConnection, who: &Principal) -> Result<u64> {
    Ok(ledger::pending(db, who.tenant()).await?)
}

/// The same, per agent (of `agents`).
pub async fn pending_by_agent(
    db: &DatabaseConnection,
    who: &Principal,
    agents: &[i32],
) -> Result<std::collections::BTreeMap<i32, i64>> {
    Ok(ledger::pending_by_agent(db, who.tenant(), agents).await?)
}

/// Approves and executes exactly once; a proposal already running or done is
/// answered as it is. The transition's validity is checked first, then that the
/// tool may still run for the agent ([`ensure_runnable`]), then the tool's
/// executor, so a decided proposal is 409 whether or not its tool is connected.
/// `idempotency`: the request's `Idempotency-Key`, recorded by the claim's
/// transaction (in the execution's own task, which outlives a dropped request).
pub async fn approve(
    runner: &Runner<'_>,
    who: &Principal,
    id: i32,
    idempotency: Option<Arc<Pending>>,
) -> Result<ProposalView> {
    approve_as(runner, who.tenant(), &who.member, id, idempotency).await
}

/// [`approve`] for `actor` in `tenant`: also how the sweeper resumes a proposal a
/// crash left `approved` (the claim is conditional, so it still runs once).
pub async fn approve_as(
    runner: &Runner<'_>,
    tenant: &str,
    actor: &str,
    id: i32,
    idempotency: Option<Arc<Pending>>,
) -> Result<ProposalView> {
    let now = runner.clock.now();
    let row = ledger::get(runner.db, tenant, id).await?;
    ledger::check_approvable(runner.db, &row, actor, now).await?;
    let will_run = matches!(row.state.parse(), Ok(State::Proposed | State::Approved));
    if will_run {
        ensure_runnable(runner.db, &row, actor, now).await?;
        ensure_permitted(runner.db, &row, now).await?;
    }
    let kind = tool_type(runner.db, row.tool_id).await?;
    let executors = pinned_executors(runner, &row).await?;
    if will_run {
        // The proposal stays as it is: it can be approved once the tool is connected.
        executors
            .runnable(&row.tool_name, &kind)
            .map_err(not_connected)?;
    }
    let (db, generation) = (runner.db.clone(), runner.generation.clone());
    let clock = Arc::clone(runner.clock);
    let (tenant, actor) = (tenant.to_owned(), actor.to_owned());
    let done = in_task(async move {
        let lease = executors.lease_for(&row.tool_name);
        let key = idempotency.as_deref();
        match ledger::approve(&db, &tenant, id, &actor, now, lease, key).await? {
            Approval::Run(claimed) => {
                execute(&db, &generation, &*clock, &executors, claimed, &kind).await
            }
            Approval::AsItIs(row) => Ok(row),
        }
    });
    Ok(done.await?.into())
}

/// The executors for proposal `row`: as the revision it was served by pins its
/// tool's connector, for a gated agent (see `Runner::executors_for`).
async fn pinned_executors(
    runner: &Runner<'_>,
    row: &entity::proposals::Model,
) -> Result<crate::execute::executors::Executors> {
    let pins = match row.revision_id {
        Some(id) => crate::releases::serve::pins_of(runner.db, id).await?,
        None => Default::default(),
    };
    Ok(runner
        .executors_for(row.agent_id, &row.tool_name, &pins)
        .await?)
}

pub async fn decline(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    now: DateTime<Utc>,
    idempotency: Option<Arc<Pending>>,
) -> Result<ProposalView> {
    let key = idempotency.as_deref();
    Ok(ledger::decline(db, who.tenant(), id, &who.member, now, key)
        .await?
        .into())
}

/// Runs a failed proposal again while attempts remain and its failure was
/// retryable; validity first, then the executor's availability.
pub async fn retry(
    runner: &Runner<'_>,
    who: &Principal,
    id: i32,
    idempotency: Option<Arc<Pending>>,
) -> Result<ProposalView> {
    let row = ledger::get(runner.db, who.tenant(), id).await?;
    ledger::retryable(&row)?;
    ensure_runnable(runner.db, &row, &who.member, runner.clock.now()).await?;
    ensure_permitted(runner.db, &row, runner.clock.now()).await?;
    let kind = tool_type(runner.db, row.tool_id).await?;
    let executors = pinned_executors(runner, &row).await?;
    executors
        .runnable(&row.tool_name, &kind)
        .map_err(not_connected)?;
    let (db, generation) = (runner.db.clone(), runner.generation.clone());
    let clock = Arc::clone(runner.clock);
    let (tenant, actor) = (who.tenant().to_owned(), who.member.clone());
    let done = in_task(async move {
        let (now, lease) = (clock.now(), executors.lease_for(&row.tool_name));
        let seen = row.attempts;
        let claim = ledger::Lease {
            lease,
            idempotency: idempotency.as_deref(),
        };
        let claimed = ledger::retry_attempt(&db, &tenant, id, seen, &actor, now, claim).await?;
        execute(&db, &generation, &*clock, &executors, claimed, &kind).await
    });
    Ok(done.await?.into())
}
