//! `outcomes`: what a client reported about a conversation a revision served; one
//! row per tenant, revision and conversation (a repeated report replaces it).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "outcomes")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Taken from the reporting key, never from a request.
    pub tenant_id: String,
    pub agent_id: i32,
    pub revision_id: i32,
    pub conversation_id: String,
    pub user_id: Option<String>,
    /// `success` or `failure`.
    pub outcome: String,
    pub score: Option<f64>,
    pub created_at: DateTimeUtc,
    /// When the latest report for the conversation arrived.
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
