//! `user_agent_prompt_customizations`: a user's own instructions for one agent, in
//! one tenant; unique on (tenant_id, agent_id, user_id).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "user_agent_prompt_customizations")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub user_id: String,
    pub agent_id: i32,
    pub instructions: String,
    pub is_active: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
    /// The tenant whose user this is; never shared across tenants.
    pub tenant_id: String,
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
