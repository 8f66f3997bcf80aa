//! `agent_labels`: a named pointer from an agent to one of its revisions
//! (`production`, `latest`, ...).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "agent_labels")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    /// Unique per agent.
    pub name: String,
    pub revision_id: i32,
    /// In `gated` mode a protected label moves only by an approved change request
    /// or a rollback; `production` is protected whatever this says.
    pub protected: bool,
    /// Approving a change request for this label needs its release checks to
    /// pass (migration 24).
    pub require_checks: bool,
    /// The evaluation a change request to this label must pass (JSON; migration 26).
    pub require_evals: Option<String>,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::agent_revisions::Entity",
        from = "Column::RevisionId",
        to = "super::agent_revisions::Column::Id"
    )]
    Revision,
}

impl Related<super::agent_revisions::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Revision.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
