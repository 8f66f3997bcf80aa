//! `rollouts`: a label split between its revision (the base) and a candidate for
//! a share of users. At most one `active`, `paused` or `held` rollout per label.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "rollouts")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    pub label: String,
    /// The label's revision when the rollout started.
    pub base_revision_id: i32,
    pub candidate_revision_id: i32,
    /// The candidate's share of subjects in basis points (0..=10000).
    pub share_bp: i32,
    /// `active`, `paused`, `held` (by the guard), `completed` or `aborted`.
    pub state: String,
    /// The guard (the outcomes judge by): at least this many outcomes per side.
    /// `None`: no guard.
    pub guard_min_outcomes: Option<i32>,
    /// The guard's false-alarm rate.
    pub guard_alpha: Option<f64>,
    /// Who started it (a key name, `cli`).
    pub author: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub ended_at: Option<DateTimeUtc>,
    pub end_reason: Option<String>,
    /// The share a sign-off allowed (basis points); raising a gated rollout
    /// above it needs another. `None`: started without a sign-off.
    pub signed_share_bp: Option<i32>,
    /// When a signer resumed it after a hold: the guard judges the outcomes
    /// reported since. `None`: since it started.
    pub guard_since: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
