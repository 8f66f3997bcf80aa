//! `change_requests`: a request to move a protected label of a `gated` agent,
//! waiting for a sign-off by someone who is not its author. One row holds its
//! whole life: the request, then at most one decision.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
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
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
