//! `tools`: the tool registry.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "tools")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    /// `builtin`, `api` or `mcp`; kept as text so a drifted value can be reported, not crash a load.
    #[sea_orm(column_name = "type")]
    pub tool_type: String,
    pub description: String,
    /// `auto`, `user_configurable` or `requires_approval`; text for the same reason as `tool_type`.
    pub approval_tier: String,
    /// JSON Schema of the tool's arguments.
    pub parameters: Json,
    pub prompt_section: Option<String>,
    /// The connector an `api` or `mcp` tool's calls go to; `None` = not connected.
    pub connector_id: Option<i32>,
    /// The tool's name at its connector's server; `None` = its own name.
    pub remote_name: Option<String>,
    /// What the last sync wrote as the description (an admin's edit differs from it).
    pub synced_description: Option<String>,
    /// What the last sync wrote as the approval tier.
    pub synced_tier: Option<String>,
    /// When a sync found the remote tool gone.
    pub remote_gone_at: Option<DateTimeUtc>,
    /// A synced tool's input schema as its server published it (`parameters` is it
    /// normalized into strict form); `None` for tools an admin made.
    pub remote_schema: Option<Json>,
    /// `false` for a tool an admin accepted with a schema strict mode cannot express
    /// (exported with `strict: false`, warned about by `loadout check`).
    pub strict: bool,
    /// SHA-256 of the remote definition this synced tool serves (migration 24);
    /// `None` for tools an admin made and tools synced before pinning.
    pub pinned_fingerprint: Option<String>,
    pub is_active: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(has_many = "super::agent_tools::Entity")]
    AgentTools,
}

impl Related<super::agent_tools::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::AgentTools.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
