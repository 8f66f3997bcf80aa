//! `prompt_versions`: an immutable row per accepted change to a soul or a template.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "prompt_versions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    /// `soul` or `template`.
    pub kind: String,
    pub version: i32,
    /// `None`: the template was cleared (built-in assembly).
    pub body: Option<String>,
    /// Saved with `force: true` despite lint errors.
    pub forced: bool,
    /// Why a forced version was saved anyway (the person's words); `None` otherwise.
    pub reason: Option<String>,
    /// The API key name, `cli`, `seed` or `migration`.
    pub author: String,
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
