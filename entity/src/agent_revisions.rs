//! `agent_revisions`: an immutable, numbered snapshot of what an agent serves,
//! stored once per agent and content.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "agent_revisions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    /// 1, 2, ... per agent.
    pub number: i32,
    /// Hex SHA-256 of `content`; unique per agent.
    pub content_hash: String,
    /// The canonical JSON of what the agent serves.
    pub content: String,
    /// The API key name (or `seed`, `migration`) that first published it; `None`
    /// for writes that name nobody.
    pub author: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::agent_configurations::Entity",
        from = "Column::AgentId",
        to = "super::agent_configurations::Column::Id"
    )]
    Agent,
}

impl Related<super::agent_configurations::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Agent.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
