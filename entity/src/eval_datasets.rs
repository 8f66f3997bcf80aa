//! `eval_datasets`: one version of an agent's dataset of evaluation cases
//! (migration 26). A delete marks every version.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "eval_datasets")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    pub name: String,
    /// 1, 2, ... per agent and name.
    pub version: i32,
    /// The cases (a JSON array).
    pub cases: String,
    pub case_count: i32,
    /// SHA-256 of the cases' canonical JSON: a save of the same cases is no new version.
    pub hash: String,
    pub created_by: String,
    pub created_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
