//! `label_moves`: every move of a label, never updated (the label's history).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "label_moves")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    pub label: String,
    /// `None`: the label's first position.
    pub from_revision_id: Option<i32>,
    pub to_revision_id: i32,
    /// `publish`, `move`, `promote` or `rollback`.
    pub kind: String,
    /// Who made (or asked for) the move (a key name, `seed`, `migration`), when known.
    pub actor: Option<String>,
    /// Who signed off a `promote` (a key name).
    pub approver: Option<String>,
    /// Why, as the one who asked said.
    pub reason: Option<String>,
    /// The change request a `promote` carried out.
    pub change_request_id: Option<i32>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
