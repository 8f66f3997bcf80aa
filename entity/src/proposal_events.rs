//! `proposal_events`: append-only history of every proposal state transition.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "proposal_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub proposal_id: i32,
    pub tenant_id: String,
    /// `None` for the creation event.
    pub from_state: Option<String>,
    pub to_state: String,
    /// The API key name, `sweeper` or `system`.
    pub actor: String,
    pub detail: Option<Json>,
    pub at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
