//! `agent_configurations`: one row per agent, edited by admins.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "agent_configurations")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    /// `{"display_name", "role", "description"}`.
    pub identity: Json,
    pub soul: String,
    /// `$placeholder` template; `None` means the built-in assembly.
    pub prompt_template: Option<String>,
    /// Fills `$operating_model` on channels that include it; `None` renders nothing.
    pub operating_model: Option<String>,
    /// Fills `$interaction_learning` on channels that include it; `None` renders nothing.
    pub interaction_learning: Option<String>,
    /// Bumped on every accepted change to `soul`.
    pub soul_version: i32,
    /// Bumped on every accepted change to `prompt_template`, clearing it included.
    pub template_version: i32,
    /// `direct`: a save moves `production` too (the default); `gated`: only `latest`.
    pub release_mode: String,
    /// The agent's Cedar policy set (migration 23); `None`: the tiers decide.
    pub policy: Option<String>,
    /// The policy's test cases as JSON (migration 23), run by `loadout check`.
    pub policy_tests: Option<String>,
    /// The model, its parameters and response schema as JSON (migration 24);
    /// `None`: the application chooses.
    pub model_settings: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(has_many = "super::agent_tools::Entity")]
    AgentTools,
    #[sea_orm(has_many = "super::user_agent_prompt_customizations::Entity")]
    UserAgentPromptCustomizations,
}

impl Related<super::agent_tools::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::AgentTools.def()
    }
}

impl Related<super::user_agent_prompt_customizations::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::UserAgentPromptCustomizations.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
