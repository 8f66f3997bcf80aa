//! Labels an operator moves (issue 25, items 3 and 4): create or move a label, or
//! roll it back.
//!
//! `latest` follows every save and is never moved by hand. Any label of a `direct`
//! agent, and an unprotected label of a `gated` one, moves at once (kind `move`).
//! A protected label of a `gated` agent (`production` always is) moves only by a
//! change request that someone else signs off ([`super::change_requests`]), except
//! back to the revision it held just before: that is a rollback, made at once and
//! recorded as such. A move by hand ends the label's pending request as
//! `superseded`. Every write goes through the registry write guard.

use chrono::{DateTime, TimeDelta, Utc};
use entity::{agent_configurations, agent_labels, agent_revisions, label_moves};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::change_requests::{self, ChangeRequestView, ChangeState};
use crate::auth::Principal;
use crate::cache::Generation;
use crate::db::idempotency::Pending;
use crate::error::{Error, Kind, Result, check_size};
use crate::evals::gate::EvalGate;
use crate::registry::guard;
use crate::registry::links::agent as row;
use crate::releases::moves::{self, Move, Why};
use crate::releases::traffic;
use crate::releases::{LATEST, PRODUCTION, ReleaseMode};
use crate::vocab::MAX_TEXT_BYTES;

/// The body of `PUT /v1/agents/{agent}/labels/{label}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelPut {
    /// The revision's number the label is to point at.
    pub revision: i32,
    /// Protect (or unprotect) the label; unchanged when absent. `production` is
    /// always protected, and a protected label of a `gated` agent stays so.
    pub protected: Option<bool>,
    /// Require a change request's release checks to pass before anyone may
    /// approve it; unchanged when absent. Turned off only on a `direct` agent, or a
    /// label that is not protected.
    pub require_checks: Option<bool>,
    /// The evaluation a change request to this label must pass (the `evals`
    /// check); `null` removes it; unchanged when absent. On a protected label of a
    /// gated agent it can be set where there is none, never changed or removed.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<EvalGate>)]
    pub require_evals: Option<Option<EvalGate>>,
    /// Why, kept in the label's history (or the change request).
    pub reason: Option<String>,
}

/// `null` as `Some(None)`, so a field given as `null` differs from one left out.
fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Option<EvalGate>>, D::Error> {
    Option::<EvalGate>::deserialize(d).map(Some)
}

/// The body of a rollback.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// Why, kept in the label's history.
    pub reason: Option<String>,
}

/// A label as a move left it.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelMoved {
    pub agent: String,
    pub label: String,
    /// The revision's number it points at now.
    pub revision: i32,
    pub protected: bool,
    /// The revision it left; `null` if it did not move or was new.
    pub from_revision: Option<i32>,
    /// `move` or `rollback`; `null`: it already pointed there (only `protected`
    /// may have changed).
    pub kind: Option<String>,
}

/// What a PUT did: moved the label, or asked for a sign-off.
pub enum Outcome {
    Moved(LabelMoved),
    Requested(Box<ChangeRequestView>),
}

/// What every label write needs: the store, the generation it commits through,
/// how long a change request waits, and now.
pub struct Writing<'a> {
    pub db: &'a DatabaseConnection,
    pub generation: &'a Generation,
    pub request_ttl: TimeDelta,
    pub now: DateTime<Utc>,
    /// The bounds of the evaluation runs a change request's `evals` check starts.
    pub evals: &'a crate::evals::EvalSettings,
}

fn check_label(label: &str, reason: Option<&String>) -> Result<()> {
    crate::error::check_label(label)?;
    if label == LATEST {
        return Err(Error::refused(
            "label_automatic",
            "`latest` follows every save of the agent; it cannot be moved by hand",
        ));
    }
    if let Some(reason) = reason {
        check_size("reason", reason, MAX_TEXT_BYTES)?;
    }
    Ok(())
}

fn protected(found: &agent_labels::Model) -> bool {
    found.protected || found.name == PRODUCTION
}

async fn label_row(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
) -> Result<Option<agent_labels::Model>> {
    Ok(agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?)
}

/// The revision the label held just before its last move (`None`: it never moved).
async fn previous(db: &impl ConnectionTrait, agent_id: i32, label: &str) -> Result<Option<i32>> {
    Ok(label_moves::Entity::find()
        .filter(label_moves::Column::AgentId.eq(agent_id))
        .filter(label_moves::Column::Label.eq(label))
        .order_by_desc(label_moves::Column::Id)
        .one(db)
        .await?
        .and_then(|m| m.from_revision_id))
}

async fn revision(
    db: &impl ConnectionTrait,
    agent: &agent_configurations::Model,
    number: i32,
) -> Result<agent_revisions::Model> {
    agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .filter(agent_revisions::Column::Number.eq(number))
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("agent {:?} has no revision {number}", agent.name)))
}

async fn number(db: &impl ConnectionTrait, id: i32) -> Result<i32> {
    agent_revisions::Entity::find_by_id(id)
        .one(db)
        .await?
        .map(|r| r.number)
        .ok_or_else(|| Error::internal(format!("no revision with id {id}")))
}

/// One move made now, inside a write.
struct Now<'a> {
    agent: &'a agent_configurations::Model,
    label: &'a str,
    to: &'a agent_revisions::Model,
    from: Option<i32>,
    kind: &'static str,
    reason: Option<&'a str>,
}

/// Moves the label (recording who and why), ends its pending request as
/// superseded, and sets its protection if asked.
async fn move_now(
    db: &impl ConnectionTrait,
    who: &Principal,
    step: Now<'_>,
    protect: Option<bool>,
    now: DateTime<Utc>,
) -> Result<LabelMoved> {
    let mv = Move {
        agent_id: step.agent.id,
        to_revision_id: step.to.id,
        kind: step.kind,
        actor: Some(&who.member),
        at: now,
    };
    let why = Why {
        reason: step.reason,
        ..Why::default()
    };
    let moved = moves::move_label_why(db, step.label, &mv, &why).await?;
    if moved {
        change_requests::end_pending(db, step.agent.id, step.label, now, |_| {
            Some(ChangeState::Superseded)
        })
        .await?;
        let actor = Some(who.member.as_str());
        traffic::end_on_move(db, step.agent.id, step.label, step.kind, actor, now).await?;
    }
    let found = label_row(db, step.agent.id, step.label)
        .await?
        .ok_or_else(|| Error::internal("a label that was just moved is missing"))?;
    let found = match protect {
        Some(flag) if flag != found.protected => {
            let mut active: agent_labels::ActiveModel = found.into();
            active.protected = Set(flag);
            active.update(db).await?
        }
        _ => found,
    };
    let from = match step.from.filter(|_| moved) {
        Some(id) => Some(number(db, id).await?),
        None => None,
    };
    Ok(LabelMoved {
        agent: step.agent.name.clone(),
        protected: protected(&found),
        label: found.name,
        revision: step.to.number,
        from_revision: from,
        kind: moved.then(|| step.kind.to_owned()),
    })
}

/// Creates or moves a label (see the module): the label as moved (200), or the
/// change request a protected label of a `gated` agent waits on (202).
pub async fn put(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    put: LabelPut,
    key: Option<&Pending>,
) -> Result<Outcome> {
    check_label(label, put.reason.as_ref())?;
    if label == PRODUCTION && put.protected == Some(false) {
        return Err(unprotect("`production` is always protected"));
    }
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    let to = revision(&*write, &agent, put.revision).await?;
    let found = label_row(&*write, agent.id, label).await?;
    let gated = ReleaseMode::or_gated(&agent.release_mode) == ReleaseMode::Gated;
    let guarded = gated && found.as_ref().is_some_and(protected);
    if guarded && put.protected == Some(false) {
        return Err(unprotect(
            "a protected label of a gated agent stays protected (it would move without sign-off); switch the agent to direct first",
        ));
    }
    if guarded
        && put.require_checks == Some(false)
        && found.as_ref().is_some_and(|f| f.require_checks)
    {
        return Err(unprotect(
            "a protected label of a gated agent keeps requiring checks (approvals would skip them); switch the agent to direct first",
        ));
    }
    if let (Some(true), Some(label)) = (put.require_checks, &found)
        && !label.require_checks
    {
        // Tightening needs no sign-off: it applies now, to the request made below too.
        let mut active: agent_labels::ActiveModel = label.clone().into();
        active.require_checks = Set(true);
        active.update(&*write).await?;
    }
    if let (Some(wanted), Some(row)) = (&put.require_evals, &found) {
        set_evals(&*write, row, wanted.as_ref(), guarded).await?;
    }
    let from = found.as_ref().map(|f| f.revision_id);
    let back = from != Some(to.id) && previous(&*write, agent.id, label).await? == Some(to.id);
    if guarded && !back && from != Some(to.id) {
        let request = change_requests::Request {
            agent_id: agent.id,
            label,
            from_revision_id: from.unwrap_or(to.id),
            to_revision_id: to.id,
            reason: put.reason.as_deref(),
            expires_at: writing.now + writing.request_ttl,
            kind: change_requests::ChangeKind::Move,
            share_bp: None,
            guard: None,
            rollout_id: None,
            evals: writing.evals,
        };
        let opened = change_requests::open(&*write, who, request, writing.now).await?;
        guard::commit(write, writing.generation).await?;
        return Ok(Outcome::Requested(Box::new(opened)));
    }
    let kind = if back { moves::ROLLBACK } else { moves::MOVE };
    let step = Now {
        agent: &agent,
        label,
        to: &to,
        from,
        kind,
        reason: put.reason.as_deref(),
    };
    let moved = move_now(&*write, who, step, put.protected, writing.now).await?;
    if let Some(flag) = put.require_checks
        && let Some(label) = label_row(&*write, agent.id, label).await?
        && label.require_checks != flag
    {
        let mut active: agent_labels::ActiveModel = label.into();
        active.require_checks = Set(flag);
        active.update(&*write).await?;
    }
    if let (Some(wanted), None) = (&put.require_evals, &found)
        && let Some(row) = label_row(&*write, agent.id, label).await?
    {
        set_evals(&*write, &row, wanted.as_ref(), false).await?;
    }
    guard::commit(write, writing.generation).await?;
    Ok(Outcome::Moved(moved))
}

/// Sets (or, with `None`, removes) the label's required evaluation. A guarded
/// label (protected, gated agent) takes one where it has none: tightening needs no
/// sign-off; changing or removing one would let a single person widen what was
/// signed off.
async fn set_evals(
    db: &impl sea_orm::ConnectionTrait,
    row: &agent_labels::Model,
    wanted: Option<&EvalGate>,
    guarded: bool,
) -> Result<()> {
    let text = match wanted {
        Some(gate) => {
            gate.check()?;
            Some(gate.to_text()?)
        }
        None => None,
    };
    if text == row.require_evals {
        return Ok(());
    }
    if guarded && row.require_evals.is_some() {
        return Err(unprotect(
            "a protected label of a gated agent keeps its required evaluation (approvals would skip it); switch the agent to direct first",
        ));
    }
    let mut active: agent_labels::ActiveModel = row.clone().into();
    active.require_evals = Set(text);
    active.update(db).await?;
    Ok(())
}

fn unprotect(message: &str) -> Error {
    Error::new(Kind::Refused, "label_protected", message)
}

/// Moves the label back to the revision it held just before its last move, at
/// once and with no sign-off, recorded as `rollback`. 404 for a label the agent
/// does not have; 409 `nothing_to_roll_back` for one that never moved.
pub async fn rollback(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    body: Rollback,
    key: Option<&Pending>,
) -> Result<LabelMoved> {
    check_label(label, body.reason.as_ref())?;
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    let found = label_row(&*write, agent.id, label).await?.ok_or_else(|| {
        Error::not_found(format!("agent {:?} has no label {label:?}", agent.name))
    })?;
    let Some(back) = previous(&*write, agent.id, label).await? else {
        return Err(Error::new(
            Kind::Conflict,
            "nothing_to_roll_back",
            format!("label {label:?} has never moved: there is no revision to go back to"),
        ));
    };
    let to = agent_revisions::Entity::find_by_id(back)
        .one(&*write)
        .await?
        .ok_or_else(|| Error::internal(format!("no revision with id {back}")))?;
    let step = Now {
        agent: &agent,
        label,
        to: &to,
        from: Some(found.revision_id),
        kind: moves::ROLLBACK,
        reason: body.reason.as_deref(),
    };
    let moved = move_now(&*write, who, step, None, writing.now).await?;
    guard::commit(write, writing.generation).await?;
    Ok(moved)
}
