//! Change requests (issue 25, item 4): in `gated` mode a protected label moves only
//! when someone entitled to sign off, who is not the request's author, approves.
//!
//! **Who signs off**: a member granted sign-off power (`auth::members`: granted
//! on the database or by another signer, never minted by making a key), through
//! an operator or approver key, and never the author: the author's *member* is
//! compared, so no key the author made or holds can approve its own request. The
//! author may decline (withdraw) its own request: a decline moves nothing.
//!
//! A request's whole life is one row (the request, then at most one decision:
//! `approved`, `declined`, `expired`, `superseded`), so the decision is columns
//! and the view lists the two events. A pending request expires after the
//! `requires_approval` proposal lifetime (`--proposal-ttl`); it is shown expired as
//! soon as it is due, and stored so by the sweeper's next pass ([`expire_due`]) or
//! the next write that touches it, whichever comes first. Approving moves the label in the write guard's
//! transaction, and only if the label still points where it did when the request
//! was made; otherwise the request is `superseded` (409).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use entity::{agent_configurations, agent_labels, agent_revisions, change_requests};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::checks::{self, ReleaseChecks, Subject};
use crate::auth::keys::DEFAULT_TENANT;
use crate::auth::{Principal, Role};
use crate::db::Writer;
use crate::error::{Error, Kind, Result, check_size};
use crate::events as outbox;
use crate::registry::guard;
use crate::releases::moves::{self, Move, Why};
use crate::releases::traffic::{self, Guard};
use crate::vocab::MAX_TEXT_BYTES;

crate::closed_set! {
    /// Where a change request is.
    pub enum ChangeState as "change request state" {
        /// Waiting for a sign-off.
        Pending = "pending",
        /// Signed off; the label moved.
        Approved = "approved",
        /// Declined (or withdrawn by its author); the label stayed.
        Declined = "declined",
        /// Nobody decided within its lifetime; the label stayed.
        Expired = "expired",
        /// The label moved another way first (a rollback, a move while the agent
        /// was `direct`); the label stayed where that put it.
        Superseded = "superseded",
    }
}

crate::closed_set! {
    /// What approving a change request does.
    pub enum ChangeKind as "change request kind" {
        /// The label moves to `to_revision`.
        Move = "move",
        /// A rollout of `to_revision` starts on the label at `percent`.
        RolloutStart = "rollout_start",
        /// Rollout `rollout_id` completes: the label moves to its candidate.
        RolloutComplete = "rollout_complete",
        /// Rollout `rollout_id`'s share rises to `percent`, above what was
        /// signed off (lowering it, pausing and aborting need no sign-off).
        RolloutShare = "rollout_share",
    }
}

/// One step of a request's life.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeEvent {
    pub state: ChangeState,
    /// Whose key made it (`null` for an expiry or a supersession).
    pub by: Option<String>,
    pub at: DateTime<Utc>,
    pub reason: Option<String>,
}

/// A request to move a protected label.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeRequestView {
    pub id: i32,
    /// What approving does: move the label, or start or complete a rollout.
    pub kind: ChangeKind,
    pub agent: String,
    pub label: String,
    /// A `rollout_start`'s or `rollout_share`'s share of subjects in percent.
    pub percent: Option<f64>,
    /// A `rollout_start`'s guard.
    pub guard: Option<Guard>,
    /// The rollout a `rollout_complete` completes.
    pub rollout_id: Option<i32>,
    /// Where the label pointed when the request was made.
    pub from_revision: i32,
    /// Where approving moves it.
    pub to_revision: i32,
    pub state: ChangeState,
    /// Why, as the author said.
    pub reason: Option<String>,
    /// The author's key name.
    pub requested_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub decision_reason: Option<String>,
    /// The request, then its decision, oldest first.
    pub events: Vec<ChangeEvent>,
    /// The release checks computed when it opened (or last run again); `null` for
    /// a request from before checks.
    pub checks: Option<ReleaseChecks>,
    /// Whether the label requires the checks to pass before approval.
    pub require_checks: bool,
}

/// Change requests, newest first (at most [`LIST_LIMIT`]).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChangeRequestList {
    pub change_requests: Vec<ChangeRequestView>,
}

/// The body of an approve or decline.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Why, kept with the decision.
    pub reason: Option<String>,
}

/// Which requests a list shows.
#[derive(Debug, Default)]
pub struct Filter {
    pub state: Option<ChangeState>,
    pub agent: Option<String>,
}

/// The most requests one list shows.
pub const LIST_LIMIT: u64 = 200;

const SIGNERS: &str = "an operator key, or an approver key of the default tenant, of a member granted sign-off (`loadout members grant-signoff`)";

const READERS: &str = "an admin or operator key, or an approver key of the default tenant";

/// Whether `who` may approve or decline change requests: a signer's operator key,
/// or a signer's approver key of the default tenant. A change request moves the
/// configuration every tenant's agents run, which the instance's own people sign
/// off; another tenant's signer decides that tenant's signer grants only.
pub fn may_sign_off(who: &Principal) -> bool {
    who.signer
        && match who.role {
            Role::Operator => true,
            Role::Approver => who.tenant() == DEFAULT_TENANT,
            Role::Admin | Role::Agent => false,
        }
}

/// Whether `who` may read change requests and run their checks: admins and
/// operators (who read the configuration) and the default tenant's approvers
/// (who sign them off), signers or not.
pub fn may_read(who: &Principal) -> bool {
    match who.role {
        Role::Operator | Role::Admin => true,
        Role::Approver => who.tenant() == DEFAULT_TENANT,
        Role::Agent => false,
    }
}

fn readable(who: &Principal) -> Result<()> {
    match may_read(who) {
        true => Ok(()),
        false => Err(Error::forbidden(READERS)),
    }
}

/// The state a request is in at `now`: a pending one past its expiry is expired.
fn state_at(row: &change_requests::Model, now: DateTime<Utc>) -> ChangeState {
    let stored = row.state.parse().unwrap_or(ChangeState::Superseded);
    if stored == ChangeState::Pending && row.expires_at <= now {
        ChangeState::Expired
    } else {
        stored
    }
}

fn events(row: &change_requests::Model, state: ChangeState) -> Vec<ChangeEvent> {
    let mut events = vec![ChangeEvent {
        state: ChangeState::Pending,
        by: Some(row.requested_by.clone()),
        at: row.created_at,
        reason: row.reason.clone(),
    }];
    if state != ChangeState::Pending {
        events.push(ChangeEvent {
            state,
            by: row.decided_by.clone(),
            at: row.decided_at.unwrap_or(row.expires_at),
            reason: row.decision_reason.clone(),
        });
    }
    events
}

/// The views of `rows`, with their agents' names and revisions' numbers.
async fn views(
    db: &impl ConnectionTrait,
    rows: Vec<change_requests::Model>,
    now: DateTime<Utc>,
) -> Result<Vec<ChangeRequestView>> {
    let agent_ids: Vec<i32> = rows.iter().map(|r| r.agent_id).collect();
    let revision_ids: Vec<i32> = rows
        .iter()
        .flat_map(|r| [r.from_revision_id, r.to_revision_id])
        .collect();
    let names: BTreeMap<i32, String> = agent_configurations::Entity::find()
        .select_only()
        .column(agent_configurations::Column::Id)
        .column(agent_configurations::Column::Name)
        .filter(agent_configurations::Column::Id.is_in(agent_ids))
        .into_tuple::<(i32, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let numbers: BTreeMap<i32, i32> = agent_revisions::Entity::find()
        .select_only()
        .column(agent_revisions::Column::Id)
        .column(agent_revisions::Column::Number)
        .filter(agent_revisions::Column::Id.is_in(revision_ids))
        .into_tuple::<(i32, i32)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let requiring: BTreeSet<(i32, String)> = agent_labels::Entity::find()
        .select_only()
        .column(agent_labels::Column::AgentId)
        .column(agent_labels::Column::Name)
        .filter(agent_labels::Column::RequireChecks.eq(true))
        .into_tuple::<(i32, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let number = |id: i32| {
        numbers
            .get(&id)
            .copied()
            .ok_or_else(|| Error::internal(format!("no revision with id {id}")))
    };
    rows.into_iter()
        .map(|row| {
            let state = state_at(&row, now);
            Ok(ChangeRequestView {
                id: row.id,
                kind: row.kind.parse().unwrap_or(ChangeKind::Move),
                percent: row.rollout_share_bp.map(traffic::percent),
                guard: match (row.rollout_guard_min_outcomes, row.rollout_guard_alpha) {
                    (Some(min_outcomes), Some(alpha)) => Some(Guard {
                        min_outcomes,
                        alpha,
                    }),
                    _ => None,
                },
                rollout_id: row.rollout_id,
                agent: names.get(&row.agent_id).cloned().unwrap_or_default(),
                from_revision: number(row.from_revision_id)?,
                to_revision: number(row.to_revision_id)?,
                state,
                events: events(&row, state),
                checks: ReleaseChecks::parse(row.checks.as_deref()),
                require_checks: requiring.contains(&(row.agent_id, row.label.clone())),
                label: row.label,
                reason: row.reason,
                requested_by: row.requested_by,
                created_at: row.created_at,
                expires_at: row.expires_at,
                decided_by: row.decided_by,
                decided_at: row.decided_at,
                decision_reason: row.decision_reason,
            })
        })
        .collect()
}

async fn view(
    db: &impl ConnectionTrait,
    row: change_requests::Model,
    now: DateTime<Utc>,
) -> Result<ChangeRequestView> {
    let mut views = views(db, vec![row], now).await?;
    views
        .pop()
        .ok_or_else(|| Error::internal("a change request without its view"))
}

async fn find(db: &impl ConnectionTrait, id: i32) -> Result<change_requests::Model> {
    change_requests::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no change request {id}")))
}

/// Change requests, newest first, of one state and one agent if asked.
pub async fn list(
    db: &DatabaseConnection,
    who: &Principal,
    filter: Filter,
    now: DateTime<Utc>,
) -> Result<ChangeRequestList> {
    readable(who)?;
    let mut query = change_requests::Entity::find()
        .order_by_desc(change_requests::Column::Id)
        .limit(LIST_LIMIT);
    if let Some(name) = &filter.agent {
        let agent = crate::registry::links::agent(db, name).await?;
        query = query.filter(change_requests::Column::AgentId.eq(agent.id));
    }
    let pending =
        Condition::all().add(change_requests::Column::State.eq(ChangeState::Pending.as_str()));
    query = match filter.state {
        None => query,
        Some(ChangeState::Pending) => {
            query.filter(pending.add(change_requests::Column::ExpiresAt.gt(now)))
        }
        Some(ChangeState::Expired) => query.filter(
            Condition::any()
                .add(change_requests::Column::State.eq(ChangeState::Expired.as_str()))
                .add(pending.add(change_requests::Column::ExpiresAt.lte(now))),
        ),
        Some(other) => query.filter(change_requests::Column::State.eq(other.as_str())),
    };
    let rows = query.all(db).await?;
    Ok(ChangeRequestList {
        change_requests: views(db, rows, now).await?,
    })
}

/// One change request with its events; 404 if there is none.
pub async fn get(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    now: DateTime<Utc>,
) -> Result<ChangeRequestView> {
    readable(who)?;
    let row = find(db, id).await?;
    view(db, row, now).await
}

/// What a new request asks, inside a write.
pub struct Request<'a> {
    pub agent_id: i32,
    pub label: &'a str,
    pub from_revision_id: i32,
    pub to_revision_id: i32,
    pub reason: Option<&'a str>,
    pub expires_at: DateTime<Utc>,
    pub kind: ChangeKind,
    /// A rollout start's share (basis points) and guard.
    pub share_bp: Option<i32>,
    pub guard: Option<Guard>,
    /// The rollout a completion completes.
    pub rollout_id: Option<i32>,
    /// The bounds of the evaluation runs its `evals` check starts.
    pub evals: &'a crate::evals::EvalSettings,
}

/// Makes a pending request inside `db`'s write (a label's request already due
/// is stored expired first). A second pending request for the label is 409: the
/// partial unique index decides, so two racing requests end with one 409.
pub async fn open(
    db: &impl ConnectionTrait,
    who: &Principal,
    request: Request<'_>,
    now: DateTime<Utc>,
) -> Result<ChangeRequestView> {
    end_pending(db, request.agent_id, request.label, now, |row| {
        (row.expires_at <= now).then_some(ChangeState::Expired)
    })
    .await?;
    let label = request.label;
    let computed = compute_checks(
        db,
        Requester {
            tenant: who.tenant(),
            member: &who.member,
        },
        label,
        request.agent_id,
        (request.from_revision_id, request.to_revision_id),
        request.evals,
        now,
    )
    .await?;
    let checks_text = serde_json::to_string(&computed).map_err(Error::internal)?;
    let row = change_requests::ActiveModel {
        agent_id: Set(request.agent_id),
        label: Set(label.to_owned()),
        from_revision_id: Set(request.from_revision_id),
        to_revision_id: Set(request.to_revision_id),
        state: Set(ChangeState::Pending.as_str().to_owned()),
        reason: Set(request.reason.map(str::to_owned)),
        requested_by: Set(who.member.clone()),
        requested_key_id: Set(who.key_id),
        requested_member_id: Set(Some(who.member_id)),
        created_at: Set(now),
        expires_at: Set(request.expires_at),
        kind: Set(request.kind.as_str().to_owned()),
        rollout_share_bp: Set(request.share_bp),
        rollout_guard_min_outcomes: Set(request.guard.map(|g| g.min_outcomes)),
        rollout_guard_alpha: Set(request.guard.map(|g| g.alpha)),
        rollout_id: Set(request.rollout_id),
        checks: Set(Some(checks_text)),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| {
        Error::from_db(e, || {
            format!("a change request for label {label:?} is already pending: approve, decline or let it expire first")
        })
    })?;
    let waiting = announced(db, &row).await?;
    outbox::record(db, now, outbox::Event::ChangeRequestWaiting(waiting)).await?;
    view(db, row, now).await
}

/// The id of the request pending (and not past its expiry) for the agent's `label`.
pub async fn pending_for(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
    now: DateTime<Utc>,
) -> Result<Option<i32>> {
    let found = change_requests::Entity::find()
        .filter(change_requests::Column::AgentId.eq(agent_id))
        .filter(change_requests::Column::Label.eq(label))
        .filter(change_requests::Column::State.eq(ChangeState::Pending.as_str()))
        .filter(change_requests::Column::ExpiresAt.gt(now))
        .one(db)
        .await?;
    Ok(found.map(|r| r.id))
}

/// Stores every pending request past its expiry as `expired` (the sweeper's
/// pass; reads show them expired as soon as they are due either way), so the
/// `change_request.decided` webhook goes out without anyone reading them.
pub async fn expire_due(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<usize> {
    let due = change_requests::Entity::find()
        .filter(change_requests::Column::State.eq(ChangeState::Pending.as_str()))
        .filter(change_requests::Column::ExpiresAt.lte(now))
        .limit(LIST_LIMIT)
        .all(db)
        .await?;
    if due.is_empty() {
        return Ok(0);
    }
    let txn = crate::db::begin_write(db).await?;
    let mut expired = 0;
    for row in due {
        // Decided meanwhile by a request of another process: left as it is.
        let fresh = find(&txn, row.id).await?;
        if fresh.state == ChangeState::Pending.as_str() {
            let at = fresh.expires_at;
            decide(&txn, fresh, ChangeState::Expired, None, None, at).await?;
            expired += 1;
        }
    }
    txn.commit().await?;
    Ok(expired)
}

/// Ends the label's pending request (if any) in the state `how` says (`None`:
/// leave it), undecided by anyone: an expiry, or a supersession by a move.
pub async fn end_pending(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
    now: DateTime<Utc>,
    how: impl Fn(&change_requests::Model) -> Option<ChangeState>,
) -> Result<()> {
    let rows = change_requests::Entity::find()
        .filter(change_requests::Column::AgentId.eq(agent_id))
        .filter(change_requests::Column::Label.eq(label))
        .filter(change_requests::Column::State.eq(ChangeState::Pending.as_str()))
        .all(db)
        .await?;
    for row in rows {
        if let Some(state) = how(&row) {
            let at = if state == ChangeState::Expired {
                row.expires_at.min(now)
            } else {
                now
            };
            decide(db, row, state, None, None, at).await?;
        }
    }
    Ok(())
}

async fn decide(
    db: &impl ConnectionTrait,
    row: change_requests::Model,
    state: ChangeState,
    by: Option<&Principal>,
    reason: Option<&str>,
    at: DateTime<Utc>,
) -> Result<change_requests::Model> {
    let mut active: change_requests::ActiveModel = row.into();
    active.state = Set(state.as_str().to_owned());
    active.decided_at = Set(Some(at));
    active.decision_reason = Set(reason.map(str::to_owned));
    if let Some(who) = by {
        active.decided_by = Set(Some(who.member.clone()));
        active.decided_key_id = Set(Some(who.key_id));
        active.decided_member_id = Set(Some(who.member_id));
    }
    let decided = active.update(db).await?;
    let event = announced(db, &decided).await?;
    outbox::record(db, at, outbox::Event::ChangeRequestDecided(event)).await?;
    Ok(decided)
}

/// What a webhook tells of `row`: the author's reason while it waits, the
/// decider's once decided.
async fn announced(
    db: &impl ConnectionTrait,
    row: &change_requests::Model,
) -> Result<outbox::ChangeRequest> {
    let pending = row.state == ChangeState::Pending.as_str();
    let checks = ReleaseChecks::parse(row.checks.as_deref());
    Ok(outbox::ChangeRequest {
        checks_passed: checks.as_ref().map(|c| c.passed),
        checks_failing: checks
            .as_ref()
            .map(|c| c.failing().into_iter().map(str::to_owned).collect())
            .unwrap_or_default(),
        id: row.id,
        agent: outbox::agent_name(db, row.agent_id).await?,
        label: row.label.clone(),
        from: outbox::revision_number(db, row.from_revision_id).await?,
        to: outbox::revision_number(db, row.to_revision_id).await?,
        state: row.state.clone(),
        requested_by: row.requested_by.clone(),
        decided_by: row.decided_by.clone(),
        reason: match pending {
            true => row.reason.clone(),
            false => row.decision_reason.clone(),
        },
    })
}

/// The request if it may be decided now: 404 if there is none, 409 unless it is
/// pending (`Ok(Err(..))`: an expired one was stored so through the write, which
/// the caller commits before it answers the refusal).
async fn pending(
    write: &guard::Write,
    id: i32,
    now: DateTime<Utc>,
) -> Result<std::result::Result<change_requests::Model, Error>> {
    let row = find(&**write, id).await?;
    match state_at(&row, now) {
        ChangeState::Pending => Ok(Ok(row)),
        ChangeState::Expired if row.state == ChangeState::Pending.as_str() => {
            let at = row.expires_at;
            decide(&**write, row, ChangeState::Expired, None, None, at).await?;
            Ok(Err(expired(id)))
        }
        ChangeState::Expired => Err(expired(id)),
        state => Err(Error::conflict(format!(
            "change request {id} is already {state}"
        ))),
    }
}

fn expired(id: i32) -> Error {
    Error::new(
        Kind::Conflict,
        "expired",
        format!("change request {id} expired before anyone decided it; make a new one"),
    )
}

/// Approves a pending request and moves its label, in one transaction (see the
/// module). 403 `self_approval` for its author.
pub async fn approve(
    w: &Writer<'_>,
    who: &Principal,
    id: i32,
    decision: Decision,
) -> Result<ChangeRequestView> {
    // The role first (no request is read for a w.key that could never decide), then
    // the author, then the power: the author hears `self_approval` whatever it holds.
    if !matches!(who.role, Role::Operator | Role::Approver) || !may_read(who) {
        return Err(Error::forbidden(SIGNERS));
    }
    if let Some(reason) = &decision.reason {
        check_size("reason", reason, MAX_TEXT_BYTES)?;
    }
    let write = w.begin_for_agents().await?.by(&who.member);
    let row = match pending(&write, id, w.now).await? {
        Ok(row) => row,
        Err(refusal) => {
            w.commit(write).await?;
            return Err(refusal);
        }
    };
    if row.requested_member_id == Some(who.member_id) {
        return Err(Error::new(
            Kind::Forbidden,
            "self_approval",
            "the author of a change request may not approve it with any key: another signer signs it off",
        ));
    }
    if !may_sign_off(who) {
        return Err(Error::forbidden(SIGNERS));
    }
    let label = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(row.agent_id))
        .filter(agent_labels::Column::Name.eq(&row.label))
        .one(&*write)
        .await?;
    let gate = label
        .as_ref()
        .and_then(|l| crate::evals::gate::EvalGate::parse(l.require_evals.as_deref()));
    let require_checks = label.as_ref().is_some_and(|l| l.require_checks);
    if require_checks || gate.is_some() {
        let checks = with_fresh_evals(&*write, &row, gate.as_ref(), w.now).await?;
        refuse_failing_checks(&row, checks, require_checks)?;
    }
    let at = label.map(|label| label.revision_id);
    if at != Some(row.from_revision_id) {
        let reason = Some("the label moved after the request was made");
        decide(&*write, row, ChangeState::Superseded, None, reason, w.now).await?;
        w.commit(write).await?;
        return Err(Error::conflict(format!(
            "the label moved after change request {id} was made; it is superseded, make a new one"
        )));
    }
    let row = match carry_out(&write, who, row, w.now).await? {
        Ok(row) => row,
        Err(row) => {
            let reason = Some("the rollout ended after the request was made");
            decide(&*write, row, ChangeState::Superseded, None, reason, w.now).await?;
            w.commit(write).await?;
            return Err(Error::conflict(format!(
                "the rollout ended after change request {id} was made; it is superseded"
            )));
        }
    };
    let reason = decision.reason.as_deref();
    let approved = decide(
        &*write,
        row,
        ChangeState::Approved,
        Some(who),
        reason,
        w.now,
    )
    .await?;
    let answer = view(&*write, approved, w.now).await?;
    w.commit(write).await?;
    Ok(answer)
}

/// The request's stored checks, with the `evals` check read again from its runs
/// when it was pending (no run is started here: approving decides, it does not
/// wait).
async fn with_fresh_evals(
    db: &impl ConnectionTrait,
    row: &change_requests::Model,
    gate: Option<&std::result::Result<crate::evals::gate::EvalGate, String>>,
    now: DateTime<Utc>,
) -> Result<Option<ReleaseChecks>> {
    let Some(mut found) = ReleaseChecks::parse(row.checks.as_deref()) else {
        return Ok(None);
    };
    let Some(gate) = gate else {
        return Ok(Some(found));
    };
    let stale = found
        .checks
        .iter()
        .position(|c| c.name == checks::CheckName::Evals);
    let fresh_needed = stale.is_none_or(|i| found.checks[i].status == checks::CheckStatus::Pending);
    if fresh_needed {
        let tenant = crate::auth::keys::tenant_of_key(db, row.requested_key_id).await?;
        let agent = crate::events::agent_name(db, row.agent_id).await?;
        let who = crate::evals::gate::For {
            tenant: &tenant,
            member: &row.requested_by,
            agent: &agent,
        };
        let revisions = (found.base, found.candidate);
        let fresh = checks::evals(db, who, gate, revisions, None, now).await?;
        match stale {
            Some(i) => found.checks[i] = fresh,
            None => found.checks.push(fresh),
        }
        found.passed = found.checks.iter().all(|c| {
            matches!(
                c.status,
                checks::CheckStatus::Pass | checks::CheckStatus::Warn
            )
        });
    }
    Ok(Some(found))
}

/// 409 `checks_failed` naming the failing checks (or saying none were run): all
/// of them where the label requires checks, else the `evals` check alone.
fn refuse_failing_checks(
    row: &change_requests::Model,
    found: Option<ReleaseChecks>,
    require_checks: bool,
) -> Result<()> {
    let id = row.id;
    let found = match (found, require_checks) {
        (Some(mut found), false) => {
            found.checks.retain(|c| c.name == checks::CheckName::Evals);
            found.passed = found.checks.iter().all(|c| {
                matches!(
                    c.status,
                    checks::CheckStatus::Pass | checks::CheckStatus::Warn
                )
            });
            Some(found)
        }
        (found, _) => found,
    };
    match found {
        Some(found) if found.passed => Ok(()),
        Some(found) => Err(Error::new(
            Kind::Conflict,
            "checks_failed",
            format!(
                "the label requires release checks to pass, and {} failed; fix them, then run the checks again (POST /v1/change-requests/{id}/checks)",
                found.failing().join(", ")
            ),
        )),
        None => Err(Error::new(
            Kind::Conflict,
            "checks_failed",
            format!(
                "the label requires release checks to pass, and none were run; run them (POST /v1/change-requests/{id}/checks)"
            ),
        )),
    }
}

/// The evaluation the agent's `label` requires, if any.
async fn required_evals(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
) -> Result<Option<std::result::Result<crate::evals::gate::EvalGate, String>>> {
    let row = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?;
    Ok(row.and_then(|l| crate::evals::gate::EvalGate::parse(l.require_evals.as_deref())))
}

/// Whose recorded calls and snapshots the checks read.
struct Requester<'a> {
    tenant: &'a str,
    member: &'a str,
}

/// The release checks of moving the agent's label from one revision to another.
async fn compute_checks(
    db: &impl ConnectionTrait,
    who: Requester<'_>,
    label: &str,
    agent_id: i32,
    (from_revision_id, to_revision_id): (i32, i32),
    limits: &crate::evals::EvalSettings,
    now: DateTime<Utc>,
) -> Result<ReleaseChecks> {
    let agent = agent_configurations::Entity::find_by_id(agent_id)
        .one(db)
        .await?
        .ok_or_else(|| Error::internal(format!("no agent with id {agent_id}")))?;
    let revision = |id: i32| async move {
        agent_revisions::Entity::find_by_id(id)
            .one(db)
            .await?
            .ok_or_else(|| Error::internal(format!("no revision with id {id}")))
    };
    let (from, to) = (
        revision(from_revision_id).await?,
        revision(to_revision_id).await?,
    );
    let (old, new) = (
        crate::releases::content::Content::parse(&from.content)?,
        crate::releases::content::Content::parse(&to.content)?,
    );
    let subject = Subject {
        agent_id,
        agent: &agent.name,
        tenant: who.tenant,
        member: who.member,
        base: (from.number, &old),
        candidate: (to.number, &new),
        policy_tests: agent.policy_tests.as_deref(),
        evals: required_evals(db, agent_id, label).await?,
        limits,
    };
    checks::compute(db, subject, now).await
}

/// Runs a pending request's release checks again (after a fix: a snapshot
/// accepted, a recorded call's tool fixed in a new request's revision...), for
/// the tenant that requested it; whoever may read requests may run them.
pub async fn recheck(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    limits: &crate::evals::EvalSettings,
    now: DateTime<Utc>,
) -> Result<ChangeRequestView> {
    // Whoever may read the request may refresh its checks: they decide nothing.
    readable(who)?;
    let row = find(db, id).await?;
    if state_at(&row, now) != ChangeState::Pending {
        return Err(Error::conflict(format!(
            "change request {id} is {}, not pending",
            state_at(&row, now).as_str()
        )));
    }
    let tenant = crate::auth::keys::tenant_of_key(db, row.requested_key_id).await?;
    let computed = compute_checks(
        db,
        Requester {
            tenant: &tenant,
            member: &row.requested_by,
        },
        &row.label,
        row.agent_id,
        (row.from_revision_id, row.to_revision_id),
        limits,
        now,
    )
    .await?;
    let mut active: change_requests::ActiveModel = row.into();
    active.checks = Set(Some(
        serde_json::to_string(&computed).map_err(Error::internal)?,
    ));
    let saved = active.update(db).await?;
    view(db, saved, now).await
}

/// Does what an approved request asks, in its write: moves the label, or starts
/// or completes the rollout. `Ok(Err(row))`: a completion whose rollout no
/// longer runs.
async fn carry_out(
    write: &guard::Write,
    who: &Principal,
    row: change_requests::Model,
    now: DateTime<Utc>,
) -> Result<std::result::Result<change_requests::Model, change_requests::Model>> {
    let step = traffic::Transition {
        kind: traffic::EventKind::Started,
        actor: Some(&row.requested_by),
        reason: row.reason.as_deref(),
        change_request_id: Some(row.id),
        trip: None,
        at: now,
    };
    match row.kind.parse().unwrap_or(ChangeKind::Move) {
        ChangeKind::Move => {
            let mv = Move {
                agent_id: row.agent_id,
                to_revision_id: row.to_revision_id,
                kind: moves::PROMOTE,
                actor: Some(&row.requested_by),
                at: now,
            };
            let why = Why {
                approver: Some(&who.member),
                reason: row.reason.as_deref(),
                change_request_id: Some(row.id),
            };
            moves::move_label_why(&**write, &row.label, &mv, &why).await?;
            let actor = Some(row.requested_by.as_str());
            traffic::end_on_move(
                &**write,
                row.agent_id,
                &row.label,
                moves::PROMOTE,
                actor,
                now,
            )
            .await?;
        }
        ChangeKind::RolloutStart => {
            let start = traffic::Start {
                agent_id: row.agent_id,
                label: &row.label,
                base_revision_id: row.from_revision_id,
                candidate_revision_id: row.to_revision_id,
                share_bp: row.rollout_share_bp.unwrap_or(0),
                guard: match (row.rollout_guard_min_outcomes, row.rollout_guard_alpha) {
                    (Some(min_outcomes), Some(alpha)) => Some(Guard {
                        min_outcomes,
                        alpha,
                    }),
                    _ => None,
                },
                author: &row.requested_by,
            };
            traffic::start(&**write, start, step).await?;
        }
        ChangeKind::RolloutShare => {
            let running = traffic::running_row(&**write, row.agent_id, &row.label).await?;
            let Some(running) = running.filter(|r| Some(r.id) == row.rollout_id) else {
                return Ok(Err(row));
            };
            let share = row.rollout_share_bp.unwrap_or(running.share_bp);
            let mut active: entity::rollouts::ActiveModel = running.into();
            active.share_bp = Set(share);
            active.signed_share_bp = Set(Some(share));
            let step = traffic::Transition {
                kind: traffic::EventKind::ShareChanged,
                ..step
            };
            traffic::transition(&**write, active, step).await?;
        }
        ChangeKind::RolloutComplete => {
            let running = traffic::running_row(&**write, row.agent_id, &row.label).await?;
            let Some(running) = running.filter(|r| Some(r.id) == row.rollout_id) else {
                return Ok(Err(row));
            };
            if running.state == traffic::RolloutState::Held.as_str() {
                return Err(traffic::held());
            }
            let step = traffic::Transition {
                kind: traffic::EventKind::Completed,
                ..step
            };
            traffic::complete(&**write, running, Some(&who.member), step).await?;
        }
    }
    Ok(Ok(row))
}

/// Declines a pending request; the label stays. Its author may decline (withdraw) it.
pub async fn decline(
    w: &Writer<'_>,
    who: &Principal,
    id: i32,
    decision: Decision,
) -> Result<ChangeRequestView> {
    // A signer declines; the author (always an operator) may withdraw its own.
    if !may_sign_off(who) && who.role != Role::Operator {
        return Err(Error::forbidden(SIGNERS));
    }
    if let Some(reason) = &decision.reason {
        check_size("reason", reason, MAX_TEXT_BYTES)?;
    }
    let write = w.begin_for_agents().await?.by(&who.member);
    let row = match pending(&write, id, w.now).await? {
        Ok(row) => row,
        Err(refusal) => {
            w.commit(write).await?;
            return Err(refusal);
        }
    };
    if !may_sign_off(who) && row.requested_member_id != Some(who.member_id) {
        return Err(Error::forbidden(SIGNERS));
    }
    let reason = decision.reason.as_deref();
    let declined = decide(
        &*write,
        row,
        ChangeState::Declined,
        Some(who),
        reason,
        w.now,
    )
    .await?;
    let answer = view(&*write, declined, w.now).await?;
    w.commit(write).await?;
    Ok(answer)
}
