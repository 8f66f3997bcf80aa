//! `agent_tools`: which tools an agent has; unique per (agent, tool).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "agent_tools")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    pub tool_id: i32,
    pub is_active: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::agent_configurations::Entity",
        from = "Column::AgentId",
        to = "super::agent_configurations::Column::Id"
    )]
    Agent,
    #[sea_orm(
        belongs_to = "super::tools::Entity",
        from = "Column::ToolId",
        to = "super::tools::Column::Id"
    )]
    Tool,
}

impl Related<super::agent_configurations::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Agent.def()
    }
}

impl Related<super::tools::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Tool.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
