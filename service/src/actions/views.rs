//! The shapes the action path answers with: proposals, their events, and what an
//! agent relays after a tool call.

use chrono::{DateTime, Utc};
use entity::{proposal_events, proposals};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::ledger::State;

/// A proposal as an approver sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProposalView {
    pub id: i32,
    #[schema(value_type = State)]
    pub state: String,
    pub tool: String,
    pub conversation_id: String,
    pub message_id: Option<String>,
    pub user_id: Option<String>,
    /// One line for people, e.g. "Create tasks: Buy groceries".
    pub description: String,
    /// `[{field, new}]`, one row per field the call sets.
    #[schema(value_type = Vec<super::describe::PreviewRow>)]
    pub preview: Value,
    #[schema(value_type = Object)]
    pub arguments: Value,
    pub attempts: i32,
    pub max_attempts: i32,
    /// The executor's result, or `{error, retryable}`; `null` until it ran.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// A crash left the last execution's outcome unknown; it is never re-run automatically.
    pub outcome_unknown: bool,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Which revision's policy decided the call; absent when the tier decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

/// Which revision and policy decided a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DecidedBy {
    /// The revision (its number) whose policy decided.
    pub revision: i32,
    /// The deciding policy's id; `null` when the policy could not decide (then the
    /// call waits for an approver, and `reason` says why).
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DecidedBy {
    /// As stored in `proposals.decided_by`.
    pub fn parse(stored: Option<&str>) -> Option<DecidedBy> {
        serde_json::from_str(stored?).ok()
    }
}

impl From<proposals::Model> for ProposalView {
    fn from(p: proposals::Model) -> Self {
        Self {
            id: p.id,
            state: p.state,
            tool: p.tool_name,
            conversation_id: p.conversation_id,
            message_id: p.message_id,
            user_id: p.user_id,
            description: p.description,
            preview: p.preview,
            arguments: p.arguments,
            attempts: p.attempts,
            max_attempts: p.max_attempts,
            result: p.result,
            outcome_unknown: p.outcome_unknown,
            expires_at: p.expires_at,
            created_at: p.created_at,
            updated_at: p.updated_at,
            decided_by: DecidedBy::parse(p.decided_by.as_deref()),
        }
    }
}

/// One transition in a proposal's history.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    /// `null` for the creation event.
    pub from: Option<String>,
    pub to: String,
    /// The key name, `auto`, `sweeper` or `system`.
    pub actor: String,
    pub at: DateTime<Utc>,
}

impl From<proposal_events::Model> for EventView {
    fn from(e: proposal_events::Model) -> Self {
        Self {
            from: e.from_state,
            to: e.to_state,
            actor: e.actor,
            at: e.at,
        }
    }
}

/// A proposal with its events, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProposalDetail {
    #[serde(flatten)]
    pub proposal: ProposalView,
    pub events: Vec<EventView>,
}

/// A page of a conversation's proposals, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationProposals {
    pub conversation_id: String,
    pub proposals: Vec<ProposalView>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next: Option<i32>,
}

/// A call that has not run (yet), as the agent relays it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitingStatus {
    /// Waiting for a person: tell the user what was proposed.
    ProposedForApproval,
    Approved,
    Declined,
    Expired,
}

/// A call that ran or is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RanStatus {
    Executing,
    Succeeded,
    Failed,
}

/// What a tool call answers: a proposal to relay, or the result of a call that ran.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum CallResult {
    Waiting(CallWaiting),
    Ran(CallRan),
    DryRun(CallDecision),
}

/// `dry_run`: what the call would be decided, with nothing written or run.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallDecision {
    pub status: DryRunStatus,
    /// `auto` (it would run at once), `approval` (it would wait for an approver)
    /// or `deny` (a policy refuses it); never `tier`: the tier's answer is given.
    pub decision: crate::policies::Outcome,
    /// The revision the call would be decided under.
    pub revision: i32,
    /// Absent when the tier (and the user's preference) decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

/// Always `dry_run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DryRunStatus {
    DryRun,
}

/// A call that has not run (yet): proposed, approved, declined or expired.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallWaiting {
    pub status: WaitingStatus,
    pub proposal_id: i32,
    pub description: String,
    #[schema(value_type = Vec<super::describe::PreviewRow>)]
    pub preview: Value,
    /// Which revision's policy decided the call; absent when the tier decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

/// A call that ran, or is running: its result (`{error, retryable}` on failure).
#[derive(Debug, Serialize, ToSchema)]
pub struct CallRan {
    pub status: RanStatus,
    pub proposal_id: i32,
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// Which revision's policy decided the call; absent when the tier decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<DecidedBy>,
}

impl From<proposals::Model> for CallResult {
    fn from(p: proposals::Model) -> Self {
        let state = p.state.parse::<State>().unwrap_or(State::Failed);
        let decided_by = DecidedBy::parse(p.decided_by.as_deref());
        let waiting = |status| {
            CallResult::Waiting(CallWaiting {
                status,
                proposal_id: p.id,
                description: p.description.clone(),
                preview: p.preview.clone(),
                decided_by: decided_by.clone(),
            })
        };
        let ran = |status| {
            CallResult::Ran(CallRan {
                status,
                proposal_id: p.id,
                result: p.result.clone(),
                decided_by: decided_by.clone(),
            })
        };
        match state {
            State::Proposed => waiting(WaitingStatus::ProposedForApproval),
            State::Approved => waiting(WaitingStatus::Approved),
            State::Declined => waiting(WaitingStatus::Declined),
            State::Expired => waiting(WaitingStatus::Expired),
            State::Executing => ran(RanStatus::Executing),
            State::Succeeded => ran(RanStatus::Succeeded),
            State::Failed => ran(RanStatus::Failed),
        }
    }
}

/// A user's preference for a `user_configurable` tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreferenceView {
    pub user_id: String,
    pub tool: String,
    pub auto_approve: bool,
}
