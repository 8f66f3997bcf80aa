//! Rollouts an operator runs (issue 26, item 1): start, change the share, pause,
//! resume, complete, abort, and read a label's rollouts.
//!
//! The rules are the label moves' ([`super::labels`]): operators only, never on
//! `latest`, every write through the registry write guard (so it bumps the
//! generation and every process serves the new split at once). In `gated` mode a
//! protected label's start and completion open a change request that someone
//! else signs off ([`super::change_requests`]), and so does a share raised above
//! the one signed off (the sign-off of 1 % is a ceiling, not a key to 100 %);
//! lowering the share, a pause, a resume and an abort are made at once (they only
//! take traffic back towards what was signed off). A rollout its guard held
//! (`releases::guard::joint`) takes only a signer's resume or an abort.

use entity::rollouts as rows;
use entity::{agent_configurations, agent_labels, agent_revisions};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::Deserialize;
use utoipa::ToSchema;

use super::change_requests::{self, ChangeKind, ChangeRequestView};
use super::labels::Writing;
use crate::auth::Principal;
use crate::db::idempotency::Pending;
use crate::error::{Error, Result, check_label, check_size};
use crate::registry::guard;
use crate::registry::links::agent as row;
use crate::releases::serve::label_not_found;
use crate::releases::traffic::{
    self, EventKind, Guard, RolloutStatus, RolloutView, Start, Transition, basis_points,
};
use crate::releases::{LATEST, PRODUCTION, ReleaseMode};
use crate::vocab::MAX_TEXT_BYTES;

/// The body of a start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutStart {
    /// The candidate revision's number.
    pub candidate: i32,
    /// The candidate's share of subjects, 0 to 100 in steps of 0.01.
    pub percent: f64,
    /// Abort by itself when the candidate does worse (judged by the outcomes).
    pub guard: Option<Guard>,
    /// Why, kept in the history (or the change request).
    pub reason: Option<String>,
}

/// The body of a change: the share, a pause or a resume.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutPatch {
    /// The candidate's new share, 0 to 100 in steps of 0.01.
    pub percent: Option<f64>,
    /// `true` pauses (everyone gets the base), `false` resumes (the same
    /// subjects get the candidate again).
    pub paused: Option<bool>,
    /// Why, kept in the history.
    pub reason: Option<String>,
}

/// The body of a completion or an abort.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutEnd {
    /// Why, kept in the history (or the change request).
    pub reason: Option<String>,
}

/// What a start or a completion did: at once, or a change request.
pub enum Outcome {
    Done(RolloutView),
    Requested(ChangeRequestView),
}

fn check(label: &str, reason: Option<&String>) -> Result<()> {
    check_label(label)?;
    if label == LATEST {
        return Err(Error::refused(
            "label_automatic",
            "`latest` follows every save of the agent; it has no rollouts",
        ));
    }
    if let Some(reason) = reason {
        check_size("reason", reason, MAX_TEXT_BYTES)?;
    }
    Ok(())
}

async fn label_row(
    db: &impl ConnectionTrait,
    agent: &agent_configurations::Model,
    label: &str,
) -> Result<agent_labels::Model> {
    agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent.id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?
        .ok_or_else(|| label_not_found(&agent.name, label))
}

/// Whether the label's start and completion need a sign-off.
fn gated(agent: &agent_configurations::Model, label: &agent_labels::Model) -> bool {
    ReleaseMode::or_gated(&agent.release_mode) == ReleaseMode::Gated
        && (label.protected || label.name == PRODUCTION)
}

async fn running(
    db: &impl ConnectionTrait,
    agent: &agent_configurations::Model,
    label: &str,
) -> Result<rows::Model> {
    traffic::running_row(db, agent.id, label)
        .await?
        .ok_or_else(|| traffic::not_running(&agent.name, label))
}

/// Starts a rollout of `body.candidate` on the label (201), or opens the change
/// request a protected label of a `gated` agent waits on (202).
pub async fn start(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    body: RolloutStart,
    key: Option<&Pending>,
) -> Result<Outcome> {
    check(label, body.reason.as_ref())?;
    let share_bp = basis_points(body.percent)?;
    if let Some(guard) = &body.guard {
        guard.check()?;
    }
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    let found = label_row(&*write, &agent, label).await?;
    let candidate = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .filter(agent_revisions::Column::Number.eq(body.candidate))
        .one(&*write)
        .await?
        .ok_or_else(|| crate::releases::serve::revision_not_found(&agent.name, body.candidate))?;
    if candidate.id == found.revision_id {
        return Err(Error::refused(
            "candidate_is_base",
            format!("label {label:?} already serves revision {}", body.candidate),
        ));
    }
    if traffic::running_row(&*write, agent.id, label)
        .await?
        .is_some()
    {
        return Err(already_running(label));
    }
    let reason = body.reason.as_deref();
    if gated(&agent, &found) {
        let request = change_requests::Request {
            agent_id: agent.id,
            label,
            from_revision_id: found.revision_id,
            to_revision_id: candidate.id,
            reason,
            expires_at: writing.now + writing.request_ttl,
            kind: ChangeKind::RolloutStart,
            share_bp: Some(share_bp),
            guard: body.guard,
            rollout_id: None,
            evals: writing.evals,
        };
        let opened = change_requests::open(&*write, who, request, writing.now).await?;
        guard::commit(write, writing.generation).await?;
        return Ok(Outcome::Requested(opened));
    }
    let start = Start {
        agent_id: agent.id,
        label,
        base_revision_id: found.revision_id,
        candidate_revision_id: candidate.id,
        share_bp,
        guard: body.guard,
        author: &who.member,
    };
    let step = step(EventKind::Started, who, reason, writing);
    let started = traffic::start(&*write, start, step).await?;
    let view = traffic::view(&*write, &agent.name, started).await?;
    guard::commit(write, writing.generation).await?;
    Ok(Outcome::Done(view))
}

fn already_running(label: &str) -> Error {
    Error::conflict(format!(
        "label {label:?} already has a running rollout: complete or abort it first"
    ))
}

fn step<'a>(
    kind: EventKind,
    who: &'a Principal,
    reason: Option<&'a str>,
    writing: &Writing<'_>,
) -> Transition<'a> {
    Transition {
        kind,
        actor: Some(&who.member),
        reason,
        change_request_id: None,
        trip: None,
        at: writing.now,
    }
}

/// Changes the running rollout's share, pauses or resumes it (one of them, or
/// the share and the pause together); 404 `rollout_not_found` when none runs.
/// On a gated label a share above the one signed off opens a change request
/// (202) instead; a pause or resume in the same body is made at once.
pub async fn patch(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    body: RolloutPatch,
    key: Option<&Pending>,
) -> Result<Outcome> {
    check(label, body.reason.as_ref())?;
    let share = body.percent.map(basis_points).transpose()?;
    if share.is_none() && body.paused.is_none() {
        return Err(Error::invalid("give percent, paused or both"));
    }
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    let found = label_row(&*write, &agent, label).await?;
    let mut current = running(&*write, &agent, label).await?;
    let reason = body.reason.as_deref();
    if current.state == traffic::RolloutState::Held.as_str() {
        let resumed = resume_held(&write, who, current, &body, writing).await?;
        let view = traffic::view(&*write, &agent.name, resumed).await?;
        guard::commit(write, writing.generation).await?;
        return Ok(Outcome::Done(view));
    }
    let paused = current.state == traffic::RolloutState::Paused.as_str();
    if let Some(pause) = body.paused.filter(|p| *p != paused) {
        let kind = if pause {
            EventKind::Paused
        } else {
            EventKind::Resumed
        };
        current =
            traffic::transition(&*write, current.into(), step(kind, who, reason, writing)).await?;
    }
    let ceiling = current.signed_share_bp.unwrap_or(current.share_bp);
    match share.filter(|bp| *bp != current.share_bp) {
        Some(bp) if bp > ceiling && gated(&agent, &found) => {
            let request = change_requests::Request {
                agent_id: agent.id,
                label,
                from_revision_id: found.revision_id,
                to_revision_id: current.candidate_revision_id,
                reason,
                expires_at: writing.now + writing.request_ttl,
                kind: ChangeKind::RolloutShare,
                share_bp: Some(bp),
                guard: None,
                rollout_id: Some(current.id),
                evals: writing.evals,
            };
            let opened = change_requests::open(&*write, who, request, writing.now).await?;
            guard::commit(write, writing.generation).await?;
            return Ok(Outcome::Requested(opened));
        }
        Some(bp) => {
            let mut active: rows::ActiveModel = current.into();
            active.share_bp = sea_orm::Set(bp);
            let step = step(EventKind::ShareChanged, who, reason, writing);
            current = traffic::transition(&*write, active, step).await?;
        }
        None => {}
    }
    let view = traffic::view(&*write, &agent.name, current).await?;
    guard::commit(write, writing.generation).await?;
    Ok(Outcome::Done(view))
}

/// A held rollout takes one change: a signer resumes it (alone in the body, so no
/// share rides along); the guard then judges only what is reported from now on,
/// since the outcomes that tripped it have been weighed by the signer. Anything
/// else is 409 `rollout_held`; a resume without signer power is 403.
async fn resume_held(
    write: &guard::Write,
    who: &Principal,
    current: rows::Model,
    body: &RolloutPatch,
    writing: &Writing<'_>,
) -> Result<rows::Model> {
    if body.paused != Some(false) || body.percent.is_some() {
        return Err(traffic::held());
    }
    if !change_requests::may_sign_off(who) {
        return Err(Error::forbidden(
            "a member granted sign-off (`loadout members grant-signoff`) to resume a rollout its guard held",
        ));
    }
    let mut active: rows::ActiveModel = current.into();
    active.guard_since = sea_orm::Set(Some(writing.now));
    let step = step(EventKind::Resumed, who, body.reason.as_deref(), writing);
    traffic::transition(&**write, active, step).await
}

/// Completes the running rollout: the label moves to the candidate (recorded as
/// a label move of kind `rollout`), or a change request waits for a sign-off.
pub async fn complete(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    body: RolloutEnd,
    key: Option<&Pending>,
) -> Result<Outcome> {
    check(label, body.reason.as_ref())?;
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    let found = label_row(&*write, &agent, label).await?;
    let current = running(&*write, &agent, label).await?;
    if current.state == traffic::RolloutState::Held.as_str() {
        return Err(traffic::held());
    }
    let reason = body.reason.as_deref();
    if gated(&agent, &found) {
        let request = change_requests::Request {
            agent_id: agent.id,
            label,
            from_revision_id: found.revision_id,
            to_revision_id: current.candidate_revision_id,
            reason,
            expires_at: writing.now + writing.request_ttl,
            kind: ChangeKind::RolloutComplete,
            share_bp: None,
            guard: None,
            rollout_id: Some(current.id),
            evals: writing.evals,
        };
        let opened = change_requests::open(&*write, who, request, writing.now).await?;
        guard::commit(write, writing.generation).await?;
        return Ok(Outcome::Requested(opened));
    }
    let step = step(EventKind::Completed, who, reason, writing);
    let done = traffic::complete(&*write, current, None, step).await?;
    let view = traffic::view(&*write, &agent.name, done).await?;
    guard::commit(write, writing.generation).await?;
    Ok(Outcome::Done(view))
}

/// Aborts the running rollout: everyone gets the base again, and the history
/// says why.
pub async fn abort(
    writing: &Writing<'_>,
    who: &Principal,
    agent: &str,
    label: &str,
    body: RolloutEnd,
    key: Option<&Pending>,
) -> Result<RolloutView> {
    check(label, body.reason.as_ref())?;
    let write = guard::begin_for_agents(writing.db, writing.now)
        .await?
        .keyed(key)
        .await?
        .by(&who.member);
    let agent = row(&*write, agent).await?;
    label_row(&*write, &agent, label).await?;
    let current = running(&*write, &agent, label).await?;
    let step = step(EventKind::Aborted, who, body.reason.as_deref(), writing);
    let done = traffic::transition(&*write, current.into(), step).await?;
    let view = traffic::view(&*write, &agent.name, done).await?;
    guard::commit(write, writing.generation).await?;
    Ok(view)
}

/// The label's running rollout (if any) and its past ones; 404 for an unknown
/// agent or label.
pub async fn status(db: &DatabaseConnection, agent: &str, label: &str) -> Result<RolloutStatus> {
    check_label(label)?;
    let agent = row(db, agent).await?;
    label_row(db, &agent, label).await?;
    traffic::status(db, agent.id, &agent.name, label).await
}
