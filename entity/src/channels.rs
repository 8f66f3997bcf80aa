//! `channels`: where a prompt is rendered for (web, telegram, ...), as data an admin can edit.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "channels")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    pub description: String,
    /// Fills `$channel_guidance`.
    pub guidance: String,
    /// Whether `$operating_model` is rendered on this channel (else empty).
    pub include_operating_model: bool,
    /// Whether `$interaction_learning` is rendered on this channel (else empty).
    pub include_interaction_learning: bool,
    /// Whether `$session_section` is rendered on this channel (else empty).
    pub include_session_section: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
