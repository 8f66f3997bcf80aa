//! `proposals`: a write tool call waiting for, or past, the user's decision.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "proposals")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Taken from the caller's API key, never from a request.
    pub tenant_id: String,
    pub agent_id: i32,
    pub tool_id: i32,
    pub tool_name: String,
    pub user_id: Option<String>,
    pub conversation_id: String,
    pub message_id: Option<String>,
    pub arguments: Json,
    /// SHA-256 of the canonical arguments; execution refuses if they no longer match.
    pub arguments_hash: String,
    pub description: String,
    pub preview: Json,
    /// `proposed`, `approved`, `executing`, `succeeded`, `failed`, `declined` or `expired`.
    pub state: String,
    pub attempts: i32,
    pub max_attempts: i32,
    pub result: Option<Json>,
    /// Set when a crash left the execution's outcome unknown; never re-run automatically.
    pub outcome_unknown: bool,
    pub idempotency_key: Option<String>,
    /// SHA-256 of the request that carried `idempotency_key`.
    pub request_hash: Option<String>,
    pub expires_at: DateTimeUtc,
    /// While `executing`: when the execution is presumed dead.
    pub lease_until: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The revision the call was validated under (migration 19; `None` before it).
    pub revision_id: Option<i32>,
    /// Which revision and policy decided the call, as JSON `{"revision", "policy"}`
    /// (migration 23; `None`: the tier decided, or a proposal from before).
    pub decided_by: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
