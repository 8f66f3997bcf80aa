//! Rollouts (issue 26, item 1): a label split between its revision (the base)
//! and a candidate for a share of subjects, sticky per subject ([`assign`]).
//!
//! `active` serves the candidate to the subjects in the share and the base to the
//! rest; `paused` serves the base to everyone but keeps the rollout (its id, so
//! its assignment), so a resume brings the same subjects back; `completed` moved
//! the label to the candidate; `aborted` left it on the base. At most one rollout
//! per label is `active` or `paused` (a partial unique index: a second start is 409).
//!
//! Every change of a rollout, its start included, goes through [`transition`],
//! which writes the row and its history event in the caller's transaction: the
//! one place a hook (the webhooks' outbox) is added. A move of the label by any
//! other way (a move by hand, a rollback, a promotion, a `direct` agent's save)
//! ends its running rollout as aborted ([`end_on_move`]): the base it was
//! measured against is gone.

pub mod assign;

use chrono::{DateTime, Utc};
use entity::{agent_revisions, rollout_events, rollouts};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::moves::{self, Move, Why};
use crate::error::{Error, Kind, Result};
use crate::events::{self, Event};

pub use assign::WHOLE;

crate::closed_set! {
    /// Where a rollout is.
    pub enum RolloutState as "rollout state" {
        /// The candidate serves the subjects in the share.
        Active = "active",
        /// The base serves everyone; a resume brings the same subjects back.
        Paused = "paused",
        /// The label moved to the candidate.
        Completed = "completed",
        /// Traffic went back to the base.
        Aborted = "aborted",
        /// A tenant's guard tripped: the base serves everyone until a second
        /// tenant's guard agrees (aborted), a signer resumes it, or anyone aborts it.
        Held = "held",
    }
}

impl RolloutState {
    /// The states of a rollout that still runs (at most one per label).
    pub const RUNNING: [RolloutState; 3] = [
        RolloutState::Active,
        RolloutState::Paused,
        RolloutState::Held,
    ];

    /// Whether a rollout in this state still runs.
    pub fn running(self) -> bool {
        Self::RUNNING.contains(&self)
    }
}

crate::closed_set! {
    /// One step of a rollout's history.
    pub enum EventKind as "rollout event" {
        Started = "started",
        ShareChanged = "share_changed",
        Paused = "paused",
        Resumed = "resumed",
        Completed = "completed",
        Aborted = "aborted",
        /// A tenant's guard tripped (see [`RolloutState::Held`]).
        Held = "held",
    }
}

/// Which revision a subject was served by a running rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The label's revision.
    Base,
    /// The rollout's candidate.
    Candidate,
}

/// A guard: once each side has `min_outcomes` outcomes, a candidate that fails
/// more often than the base at confidence `1 - alpha`, in one tenant's outcomes,
/// holds the rollout; two tenants agreeing, or the only tenant that reported,
/// abort it (`releases::guard::joint`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// Outcomes each side needs before the guard judges (at least 1).
    pub min_outcomes: i32,
    /// The false-alarm rate, in (0, 0.5].
    pub alpha: f64,
}

impl Guard {
    /// 422 unless the numbers make sense.
    pub fn check(&self) -> Result<()> {
        if self.min_outcomes < 1 || self.min_outcomes > 1_000_000 {
            return Err(Error::refused(
                "invalid_guard",
                "guard.min_outcomes is between 1 and 1000000",
            ));
        }
        if !(self.alpha > 0.0 && self.alpha <= 0.5) {
            return Err(Error::refused(
                "invalid_guard",
                "guard.alpha is a false-alarm rate above 0 and at most 0.5",
            ));
        }
        Ok(())
    }

    fn of(row: &rollouts::Model) -> Option<Guard> {
        match (row.guard_min_outcomes, row.guard_alpha) {
            (Some(min_outcomes), Some(alpha)) => Some(Guard {
                min_outcomes,
                alpha,
            }),
            _ => None,
        }
    }
}

/// A percent (0 to 100, to 0.01) in basis points; 422 `invalid_percent` otherwise.
pub fn basis_points(percent: f64) -> Result<i32> {
    let bp = (percent * 100.0).round();
    if !percent.is_finite()
        || !(0.0..=100.0).contains(&percent)
        || (percent * 100.0 - bp).abs() > 1e-6
    {
        return Err(Error::refused(
            "invalid_percent",
            format!("percent is between 0 and 100 in steps of 0.01, not {percent}"),
        ));
    }
    Ok(bp as i32)
}

/// Basis points as a percent.
pub fn percent(bp: i32) -> f64 {
    f64::from(bp) / 100.0
}

/// What serving needs of a label's running rollout: read once per generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    pub id: i32,
    /// The candidate's share in basis points.
    pub share_bp: u16,
    /// `false`: paused or held, everyone gets the base.
    pub active: bool,
    /// The candidate revision's number.
    pub candidate: i32,
}

impl Running {
    /// The side `subject` (none: the base) is on.
    pub fn side(&self, agent: &str, label: &str, subject: Option<&str>) -> Side {
        match subject {
            Some(s)
                if self.active && assign::candidate(agent, label, self.id, s, self.share_bp) =>
            {
                Side::Candidate
            }
            _ => Side::Base,
        }
    }
}

/// The label's running (`active`, `paused` or `held`) rollout, if any.
pub async fn running_row(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
) -> std::result::Result<Option<rollouts::Model>, DbErr> {
    rollouts::Entity::find()
        .filter(rollouts::Column::AgentId.eq(agent_id))
        .filter(rollouts::Column::Label.eq(label))
        .filter(rollouts::Column::State.is_in(RolloutState::RUNNING.map(RolloutState::as_str)))
        .one(db)
        .await
}

/// What serving needs of the label's running rollout (see [`Running`]).
pub async fn running(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
) -> std::result::Result<Option<Running>, DbErr> {
    let Some(row) = running_row(db, agent_id, label).await? else {
        return Ok(None);
    };
    let candidate: Option<i32> = agent_revisions::Entity::find_by_id(row.candidate_revision_id)
        .select_only()
        .column(agent_revisions::Column::Number)
        .into_tuple()
        .one(db)
        .await?;
    Ok(candidate.map(|candidate| Running {
        id: row.id,
        share_bp: row.share_bp.clamp(0, i32::from(WHOLE)) as u16,
        active: row.state == RolloutState::Active.as_str(),
        candidate,
    }))
}

/// One change of a rollout: what the row becomes and the event that says so.
pub struct Transition<'a> {
    pub kind: EventKind,
    pub actor: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// The change request whose sign-off made it.
    pub change_request_id: Option<i32>,
    /// A hold's or the guard's abort: the tenants whose guard tripped and the statistic.
    pub trip: Option<&'a events::GuardTrip>,
    pub at: DateTime<Utc>,
}

/// Writes `row` (inserted when it has no id yet: a start) as the transition
/// leaves it and records the event, inside the caller's transaction. Every
/// rollout change goes through here (see the module). A second running rollout
/// of the label is 409 (the partial unique index decides).
pub async fn transition(
    db: &impl ConnectionTrait,
    mut row: rollouts::ActiveModel,
    step: Transition<'_>,
) -> Result<rollouts::Model> {
    row.updated_at = Set(step.at);
    let state = match step.kind {
        EventKind::Started | EventKind::Resumed => Some(RolloutState::Active),
        EventKind::Paused => Some(RolloutState::Paused),
        EventKind::Completed => Some(RolloutState::Completed),
        EventKind::Aborted => Some(RolloutState::Aborted),
        EventKind::Held => Some(RolloutState::Held),
        EventKind::ShareChanged => None,
    };
    if let Some(state) = state {
        row.state = Set(state.as_str().to_owned());
    }
    if matches!(step.kind, EventKind::Completed | EventKind::Aborted) {
        row.ended_at = Set(Some(step.at));
        row.end_reason = Set(step.reason.map(str::to_owned));
    }
    let saved = if row.id.is_not_set() {
        row.insert(db).await.map_err(|e| {
            Error::from_db(e, || {
                "the label already has a running rollout: complete or abort it first".to_owned()
            })
        })?
    } else {
        row.update(db).await?
    };
    rollout_events::ActiveModel {
        rollout_id: Set(saved.id),
        kind: Set(step.kind.as_str().to_owned()),
        actor: Set(step.actor.map(str::to_owned)),
        share_bp: Set(saved.share_bp),
        reason: Set(step.reason.map(str::to_owned)),
        change_request_id: Set(step.change_request_id),
        created_at: Set(step.at),
        ..Default::default()
    }
    .insert(db)
    .await?;
    events::record(db, step.at, rollout_event(db, &saved, &step).await?).await?;
    Ok(saved)
}

/// The webhook event of a transition (`rollout.*`): a pause or a resume is a change.
async fn rollout_event(
    db: &impl ConnectionTrait,
    saved: &rollouts::Model,
    step: &Transition<'_>,
) -> Result<Event> {
    let rollout = events::Rollout {
        agent: events::agent_name(db, saved.agent_id).await?,
        label: saved.label.clone(),
        rollout: saved.id,
        base: events::revision_number(db, saved.base_revision_id).await?,
        candidate: events::revision_number(db, saved.candidate_revision_id).await?,
        share: f64::from(saved.share_bp) / 100.0,
        actor: step.actor.map(str::to_owned),
        reason: step.reason.map(str::to_owned),
        guard: step.trip.cloned(),
    };
    Ok(match step.kind {
        EventKind::Started => Event::RolloutStarted(rollout),
        EventKind::Completed => Event::RolloutCompleted(rollout),
        EventKind::Aborted => Event::RolloutAborted(rollout),
        EventKind::Held => Event::RolloutHeld(rollout),
        EventKind::ShareChanged | EventKind::Paused | EventKind::Resumed => {
            Event::RolloutChanged(rollout)
        }
    })
}

/// What a start takes.
pub struct Start<'a> {
    pub agent_id: i32,
    pub label: &'a str,
    pub base_revision_id: i32,
    pub candidate_revision_id: i32,
    pub share_bp: i32,
    pub guard: Option<Guard>,
    pub author: &'a str,
}

/// Starts a rollout inside the caller's write (see [`transition`]).
pub async fn start(
    db: &impl ConnectionTrait,
    start: Start<'_>,
    step: Transition<'_>,
) -> Result<rollouts::Model> {
    if start.base_revision_id == start.candidate_revision_id {
        return Err(Error::refused(
            "candidate_is_base",
            "the candidate is the revision the label already serves",
        ));
    }
    let row = rollouts::ActiveModel {
        agent_id: Set(start.agent_id),
        label: Set(start.label.to_owned()),
        base_revision_id: Set(start.base_revision_id),
        candidate_revision_id: Set(start.candidate_revision_id),
        share_bp: Set(start.share_bp),
        state: Set(RolloutState::Active.as_str().to_owned()),
        guard_min_outcomes: Set(start.guard.map(|g| g.min_outcomes)),
        guard_alpha: Set(start.guard.map(|g| g.alpha)),
        author: Set(start.author.to_owned()),
        created_at: Set(step.at),
        // A start a change request carried out is a sign-off of its share.
        signed_share_bp: Set(step.change_request_id.map(|_| start.share_bp)),
        ..Default::default()
    };
    transition(db, row, step).await
}

/// Completes `row`: the label moves to the candidate (a label move of kind
/// `rollout`), inside the caller's write.
pub async fn complete(
    db: &impl ConnectionTrait,
    row: rollouts::Model,
    approver: Option<&str>,
    step: Transition<'_>,
) -> Result<rollouts::Model> {
    let mv = Move {
        agent_id: row.agent_id,
        to_revision_id: row.candidate_revision_id,
        kind: moves::ROLLOUT,
        actor: step.actor,
        at: step.at,
    };
    let why = Why {
        approver,
        reason: step.reason,
        change_request_id: step.change_request_id,
    };
    let label = row.label.clone();
    let done = transition(db, row.into(), step).await?;
    moves::move_label_why(db, &label, &mv, &why).await?;
    Ok(done)
}

/// Ends the label's running rollout as aborted because the label moved another
/// way (`kind`: `move`, `rollback`, `promote`, `publish`). Call it after every
/// move of a label that is not a rollout's completion.
pub async fn end_on_move(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
    kind: &str,
    actor: Option<&str>,
    at: DateTime<Utc>,
) -> Result<()> {
    if let Some(row) = running_row(db, agent_id, label).await? {
        let reason = format!("the label moved ({kind}): the rollout's base is no longer served");
        let step = Transition {
            kind: EventKind::Aborted,
            actor,
            reason: Some(&reason),
            change_request_id: None,
            trip: None,
            at,
        };
        transition(db, row.into(), step).await?;
    }
    Ok(())
}

/// One event of a rollout's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutEventView {
    pub kind: EventKind,
    /// Who (a key name, `cli`); `null` for the service itself.
    pub by: Option<String>,
    /// The candidate's share after it, in percent.
    pub percent: f64,
    pub reason: Option<String>,
    /// The change request whose sign-off made it.
    pub change_request_id: Option<i32>,
    pub at: DateTime<Utc>,
}

/// A rollout with its history.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutView {
    pub id: i32,
    pub agent: String,
    pub label: String,
    /// The label's revision when it started (what the rest of the subjects get).
    pub base_revision: i32,
    pub candidate_revision: i32,
    /// The candidate's share of subjects in percent (to 0.01).
    pub percent: f64,
    pub state: RolloutState,
    /// `null`: no guard.
    pub guard: Option<Guard>,
    /// Who started it.
    pub author: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// Why it completed or aborted.
    pub end_reason: Option<String>,
    /// Oldest first.
    pub events: Vec<RolloutEventView>,
}

/// A label's running rollout (if any) and its past ones.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutStatus {
    pub agent: String,
    pub label: String,
    /// The running (`active`, `paused` or `held`) rollout; `null` when none runs.
    pub current: Option<RolloutView>,
    /// Ended rollouts, newest first (at most [`PAST_LIMIT`]).
    pub past: Vec<RolloutView>,
}

/// The most ended rollouts a status shows.
pub const PAST_LIMIT: u64 = 20;

async fn number(db: &impl ConnectionTrait, id: i32) -> Result<i32> {
    agent_revisions::Entity::find_by_id(id)
        .select_only()
        .column(agent_revisions::Column::Number)
        .into_tuple()
        .one(db)
        .await?
        .ok_or_else(|| Error::internal(format!("no revision with id {id}")))
}

/// The view of `row` with its history.
pub async fn view(
    db: &impl ConnectionTrait,
    agent: &str,
    row: rollouts::Model,
) -> Result<RolloutView> {
    let events = rollout_events::Entity::find()
        .filter(rollout_events::Column::RolloutId.eq(row.id))
        .order_by_asc(rollout_events::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(|e| RolloutEventView {
            kind: e.kind.parse().unwrap_or(EventKind::Aborted),
            by: e.actor,
            percent: percent(e.share_bp),
            reason: e.reason,
            change_request_id: e.change_request_id,
            at: e.created_at,
        })
        .collect();
    Ok(RolloutView {
        id: row.id,
        agent: agent.to_owned(),
        base_revision: number(db, row.base_revision_id).await?,
        candidate_revision: number(db, row.candidate_revision_id).await?,
        percent: percent(row.share_bp),
        state: row.state.parse().unwrap_or(RolloutState::Aborted),
        guard: Guard::of(&row),
        label: row.label,
        author: row.author,
        created_at: row.created_at,
        updated_at: row.updated_at,
        ended_at: row.ended_at,
        end_reason: row.end_reason,
        events,
    })
}

/// The label's running rollout and its past ones.
pub async fn status(
    db: &impl ConnectionTrait,
    agent_id: i32,
    agent: &str,
    label: &str,
) -> Result<RolloutStatus> {
    let rows = rollouts::Entity::find()
        .filter(rollouts::Column::AgentId.eq(agent_id))
        .filter(rollouts::Column::Label.eq(label))
        .order_by_desc(rollouts::Column::Id)
        .limit(PAST_LIMIT + 1)
        .all(db)
        .await?;
    let mut current = None;
    let mut past = Vec::new();
    for row in rows {
        let running = row
            .state
            .parse::<RolloutState>()
            .is_ok_and(RolloutState::running);
        let view = view(db, agent, row).await?;
        match running {
            true => current = Some(view),
            false if (past.len() as u64) < PAST_LIMIT => past.push(view),
            false => {}
        }
    }
    Ok(RolloutStatus {
        agent: agent.to_owned(),
        label: label.to_owned(),
        current,
        past,
    })
}

/// 404 `rollout_not_found`: the label has no running rollout.
pub fn not_running(agent: &str, label: &str) -> Error {
    Error::new(
        Kind::NotFound,
        "rollout_not_found",
        format!("label {label:?} of agent {agent:?} has no running rollout"),
    )
}

/// 409 `rollout_held`: what a held rollout refuses (anything but a signer's resume
/// or an abort).
pub fn held() -> crate::error::Error {
    crate::error::Error::new(
        crate::error::Kind::Conflict,
        "rollout_held",
        "the rollout is held by its guard: a signer resumes it (PATCH with \"paused\": false), or abort it",
    )
}
