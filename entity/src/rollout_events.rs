//! `rollout_events`: a rollout's history (started, share changed, paused,
//! resumed, completed, aborted), never updated.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "rollout_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub rollout_id: i32,
    /// `started`, `share_changed`, `paused`, `resumed`, `completed` or `aborted`.
    pub kind: String,
    /// Who (a key name, `cli`); `None` for the service itself (a guard).
    pub actor: Option<String>,
    /// The share after the event, in basis points.
    pub share_bp: i32,
    pub reason: Option<String>,
    /// The change request whose sign-off made it (gated start or completion).
    pub change_request_id: Option<i32>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
