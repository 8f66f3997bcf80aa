//! `tool_changes`: a remote tool definition a sync found that differs from what
//! the tool serves, held for an operator (migration 24). One row holds its whole
//! life: `pending`, then `accepted`, `rejected` or `superseded`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "tool_changes")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub tool_id: i32,
    /// `added` (a new remote tool, switched off until accepted) or `changed`.
    pub kind: String,
    /// SHA-256 of the held definition.
    pub fingerprint: String,
    /// The remote tool as its server sent it (MCP `Tool` JSON).
    pub definition: String,
    /// `pending`, `accepted`, `rejected` or `superseded`.
    pub state: String,
    pub created_at: DateTimeUtc,
    pub decided_at: Option<DateTimeUtc>,
    /// The deciding member's name.
    pub decided_by: Option<String>,
    pub decided_member_id: Option<i32>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
