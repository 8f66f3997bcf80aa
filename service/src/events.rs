//! What changed, for the outside world: the typed [`Event`]s and the outbox they
//! are written to ([`record`]), inside the transaction of the change itself.
//!
//! A write records its event and nothing more: one row (`webhook_events`, its
//! exact body and `webhook-id`) in the change's own transaction, so no number of
//! subscriptions changes a write's cost or the size of its SQL. The delivery job
//! derives the deliveries after the commit (`webhooks::fan_out`): one pending
//! delivery per subscription that wanted the event when it was recorded. Since the
//! row commits with the change or not at all, a change that committed always has
//! its event, and a crash after the commit loses nothing.
//!
//! Layer 2: it uses `entity`, `error` and the random source only, so `releases`,
//! `agents` and `actions` can all call it. Payloads hold names, numbers, ids and
//! reasons: never a secret, a header value or a prompt's text.

use chrono::{DateTime, SecondsFormat, Utc};
use entity::{agent_configurations, agent_revisions, webhook_events};
use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, EntityTrait, Set};
use serde::Serialize;

/// A subscription's `events` that takes every type.
pub const ALL: &str = "*";

/// Every event type, as the API and the payload's `type` name them.
pub const TYPES: &[&str] = &[
    "revision.published",
    "label.moved",
    "rollout.started",
    "rollout.changed",
    "rollout.aborted",
    "rollout.held",
    "rollout.completed",
    "change_request.waiting",
    "change_request.decided",
    "proposal.waiting",
    "proposal.decided",
    "tool_change.pending",
    "tool_change.decided",
    "eval_run.finished",
    "instructions.changed",
    "agent.deleted",
];

/// The process-wide nudge: rung by [`record`], heard by the delivery job, which
/// then looks for due deliveries at once instead of at its next poll.
static RECORDED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// What the delivery job waits on besides its poll.
pub fn recorded() -> &'static tokio::sync::Notify {
    &RECORDED
}

/// A new revision of an agent.
#[derive(Debug, Clone, Serialize)]
pub struct RevisionPublished {
    pub agent: String,
    pub revision: i32,
    pub author: Option<String>,
}

/// A label pointed at another revision.
#[derive(Debug, Clone, Serialize)]
pub struct LabelMoved {
    pub agent: String,
    pub label: String,
    /// The revision it pointed at before (`None`: the label is new).
    pub from: Option<i32>,
    pub to: i32,
    /// `publish`, `move`, `promote` or `rollback`.
    pub kind: String,
    pub actor: Option<String>,
    pub approver: Option<String>,
    pub reason: Option<String>,
    pub change_request: Option<i32>,
}

/// A rollout of a label: its base revision, the candidate and the candidate's share.
#[derive(Debug, Clone, Serialize)]
pub struct Rollout {
    pub agent: String,
    pub label: String,
    pub rollout: i32,
    pub base: i32,
    pub candidate: i32,
    /// The candidate's share of users, in percent.
    pub share: f64,
    pub actor: Option<String>,
    /// Why (an abort by the guard says so here).
    pub reason: Option<String>,
    /// A hold's, or an abort by the guard: who tripped it and on what.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardTrip>,
}

/// What tripped a rollout's guard: the tenants whose guard did, and the first one's statistic.
#[derive(Debug, Clone, Serialize)]
pub struct GuardTrip {
    pub tenants: Vec<String>,
    pub base_failure_rate: f64,
    pub base_outcomes: u64,
    pub candidate_failure_rate: f64,
    pub candidate_outcomes: u64,
    /// The guard's statistic `E` and the threshold it reached (`k/alpha`, `k` the tenants it is split over).
    pub likelihood_ratio: f64,
    pub threshold: f64,
}

/// A change request to move a protected label.
#[derive(Debug, Clone, Serialize)]
pub struct ChangeRequest {
    pub id: i32,
    pub agent: String,
    pub label: String,
    pub from: i32,
    pub to: i32,
    /// `pending`, or the decision: `approved`, `declined`, `expired`, `superseded`.
    pub state: String,
    pub requested_by: String,
    /// The decider's key name (none for an expiry or a supersession).
    pub decided_by: Option<String>,
    /// The author's reason while waiting, the decider's once decided.
    pub reason: Option<String>,
    /// Whether its release checks passed (`None`: none were run).
    pub checks_passed: Option<bool>,
    /// The names of the checks that fail.
    pub checks_failing: Vec<String>,
}

/// A tool-call proposal (its arguments are never in the payload).
#[derive(Debug, Clone, Serialize)]
pub struct Proposal {
    pub id: i32,
    pub tenant: String,
    pub agent: String,
    pub tool: String,
    pub conversation: String,
    /// `proposed`, or the decision: `approved`, `declined`, `expired`.
    pub state: String,
    pub actor: String,
}

/// A synced tool's remote definition held for an operator, or its decision.
#[derive(Debug, Clone, Serialize)]
pub struct ToolChange {
    pub id: i32,
    pub tool: String,
    pub connector: String,
    /// `added` or `changed`.
    pub kind: String,
    /// `pending`, or the decision: `accepted`, `rejected`, `superseded`.
    pub state: String,
    /// Who decided (`None` while pending or when superseded by a sync).
    pub actor: Option<String>,
}

/// An evaluation run that ended: succeeded, failed or cancelled, with its counts.
#[derive(Debug, Clone, Serialize)]
pub struct EvalRun {
    pub run: i32,
    pub tenant: String,
    pub agent: String,
    pub revision: i32,
    pub dataset: String,
    pub dataset_version: i32,
    pub state: String,
    pub total: i32,
    pub passed: i32,
    pub errors: i32,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// A tenant's user's standing instructions for an agent were set or switched off
/// (never their text).
#[derive(Debug, Clone, Serialize)]
pub struct Instructions {
    pub tenant: String,
    pub agent: String,
    pub user: String,
    /// Whether the user now has instructions.
    pub active: bool,
}

/// An agent was deleted: it serves nothing any more.
#[derive(Debug, Clone, Serialize)]
pub struct AgentDeleted {
    pub agent: String,
}

/// Something that changed, as a webhook tells it: `type` and `data`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    #[serde(rename = "revision.published")]
    RevisionPublished(RevisionPublished),
    #[serde(rename = "label.moved")]
    LabelMoved(LabelMoved),
    #[serde(rename = "rollout.started")]
    RolloutStarted(Rollout),
    #[serde(rename = "rollout.changed")]
    RolloutChanged(Rollout),
    #[serde(rename = "rollout.aborted")]
    RolloutAborted(Rollout),
    #[serde(rename = "rollout.held")]
    RolloutHeld(Rollout),
    #[serde(rename = "rollout.completed")]
    RolloutCompleted(Rollout),
    #[serde(rename = "change_request.waiting")]
    ChangeRequestWaiting(ChangeRequest),
    #[serde(rename = "change_request.decided")]
    ChangeRequestDecided(ChangeRequest),
    #[serde(rename = "proposal.waiting")]
    ProposalWaiting(Proposal),
    #[serde(rename = "proposal.decided")]
    ProposalDecided(Proposal),
    #[serde(rename = "tool_change.pending")]
    ToolChangePending(ToolChange),
    #[serde(rename = "tool_change.decided")]
    ToolChangeDecided(ToolChange),
    #[serde(rename = "eval_run.finished")]
    EvalRunFinished(EvalRun),
    #[serde(rename = "instructions.changed")]
    InstructionsChanged(Instructions),
    #[serde(rename = "agent.deleted")]
    AgentDeleted(AgentDeleted),
}

impl Event {
    /// The event's type (`label.moved`, ...), one of [`TYPES`].
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RevisionPublished(_) => "revision.published",
            Event::LabelMoved(_) => "label.moved",
            Event::RolloutStarted(_) => "rollout.started",
            Event::RolloutChanged(_) => "rollout.changed",
            Event::RolloutAborted(_) => "rollout.aborted",
            Event::RolloutHeld(_) => "rollout.held",
            Event::RolloutCompleted(_) => "rollout.completed",
            Event::ChangeRequestWaiting(_) => "change_request.waiting",
            Event::ChangeRequestDecided(_) => "change_request.decided",
            Event::ProposalWaiting(_) => "proposal.waiting",
            Event::ProposalDecided(_) => "proposal.decided",
            Event::ToolChangePending(_) => "tool_change.pending",
            Event::ToolChangeDecided(_) => "tool_change.decided",
            Event::EvalRunFinished(_) => "eval_run.finished",
            Event::InstructionsChanged(_) => "instructions.changed",
            Event::AgentDeleted(_) => "agent.deleted",
        }
    }

    /// The tenant whose subscriptions alone receive it; `None` for the shared
    /// configuration's events, which every tenant's subscriptions receive.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Event::ProposalWaiting(p) | Event::ProposalDecided(p) => Some(&p.tenant),
            Event::EvalRunFinished(r) => Some(&r.tenant),
            Event::InstructionsChanged(i) => Some(&i.tenant),
            _ => None,
        }
    }

    /// The body every delivery of it sends: `{type, timestamp, data}`.
    pub fn body(&self, at: DateTime<Utc>) -> Result<String, serde_json::Error> {
        let mut value = serde_json::to_value(self)?;
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "timestamp".to_owned(),
                serde_json::Value::String(at.to_rfc3339_opts(SecondsFormat::Millis, true)),
            );
        }
        serde_json::to_string(&value)
    }
}

/// Whether a subscription's `events` (`*` or a comma-separated list) takes `kind`.
pub fn wants(events: &str, kind: &str) -> bool {
    events == ALL || events.split(',').any(|e| e.trim() == kind)
}

/// Writes `event` to the outbox inside the caller's transaction `db`: one row,
/// whatever subscribes to it (see the module).
pub async fn record(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    event: Event,
) -> Result<(), DbErr> {
    let body = event
        .body(now)
        .map_err(|e| DbErr::Custom(format!("an event could not be encoded: {e}")))?;
    webhook_events::ActiveModel {
        message_id: Set(message_id()?),
        event_type: Set(event.kind().to_owned()),
        tenant_id: Set(event.tenant().map(str::to_owned)),
        body: Set(body),
        created_at: Set(now),
        fanned_out_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await?;
    RECORDED.notify_one();
    Ok(())
}

/// A new `webhook-id`: `msg_` and 26 hex digits of randomness (104 bits).
fn message_id() -> Result<String, DbErr> {
    let mut random = [0u8; 13];
    getrandom::fill(&mut random)
        .map_err(|e| DbErr::Custom(format!("no randomness for a webhook id: {e}")))?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("msg_{hex}"))
}

/// The name of agent `id` (deleted ones too), for a payload.
pub async fn agent_name(db: &impl ConnectionTrait, id: i32) -> Result<String, DbErr> {
    Ok(agent_configurations::Entity::find_by_id(id)
        .one(db)
        .await?
        .map(|a| a.name)
        .unwrap_or_default())
}

/// The number of revision `id`, for a payload.
pub async fn revision_number(db: &impl ConnectionTrait, id: i32) -> Result<i32, DbErr> {
    Ok(agent_revisions::Entity::find_by_id(id)
        .one(db)
        .await?
        .map(|r| r.number)
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_listed_and_named_the_same() {
        let p = Proposal {
            id: 1,
            tenant: "t".into(),
            agent: "a".into(),
            tool: "x".into(),
            conversation: "c".into(),
            state: "proposed".into(),
            actor: "k".into(),
        };
        let event = Event::ProposalWaiting(p);
        let body: serde_json::Value =
            serde_json::from_str(&event.body(Utc::now()).unwrap()).unwrap();
        assert_eq!(body["type"], "proposal.waiting");
        assert_eq!(body["data"]["tenant"], "t");
        assert!(body["timestamp"].is_string());
        assert!(TYPES.contains(&event.kind()));
    }

    #[test]
    fn a_subscription_takes_all_or_the_listed_types() {
        assert!(wants("*", "label.moved"));
        assert!(wants("label.moved,proposal.waiting", "proposal.waiting"));
        assert!(!wants("label.moved", "proposal.waiting"));
    }
}
