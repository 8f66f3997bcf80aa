//! `change_requests`: a request to move a protected label of a `gated` agent,
//! waiting for a sign-off by someone who is not its author. One row holds its
//! whole life: the request, then at most one decision. It moves the label, or
//! starts or completes a rollout of it (`kind`).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "change_requests")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    pub label: String,
    /// Where the label pointed when the request was made; approving moves it only
    /// if it still points there.
    pub from_revision_id: i32,
    pub to_revision_id: i32,
    /// `pending`, `approved`, `declined`, `expired` or `superseded`.
    pub state: String,
    /// Why, as the author said.
    pub reason: Option<String>,
    /// The author's key name and key id (the id decides who may not sign off).
    pub requested_by: String,
    pub requested_key_id: i32,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub decided_by: Option<String>,
    pub decided_key_id: Option<i32>,
    pub decided_at: Option<DateTimeUtc>,
    pub decision_reason: Option<String>,
    /// `move` (the label moves to `to_revision_id`), `rollout_start` (a rollout
    /// of `to_revision_id` starts) or `rollout_complete` (rollout `rollout_id`
    /// completes: the label moves to its candidate).
    pub kind: String,
    /// A `rollout_start`'s share in basis points.
    pub rollout_share_bp: Option<i32>,
    /// A `rollout_start`'s guard.
    pub rollout_guard_min_outcomes: Option<i32>,
    pub rollout_guard_alpha: Option<f64>,
    /// The rollout a `rollout_complete` completes.
    pub rollout_id: Option<i32>,
    /// The members behind the request and its decision (who may not sign off is
    /// decided by member, never by key).
    pub requested_member_id: Option<i32>,
    pub decided_member_id: Option<i32>,
    /// The release checks computed when it opened, as JSON (migration 24).
    pub checks: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
