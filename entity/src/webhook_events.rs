//! `webhook_events`: the outbox; one row per event some subscription wanted,
//! written in the change's transaction, never updated.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "webhook_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// The `webhook-id` every delivery and retry of it carries (`msg_...`).
    pub message_id: String,
    pub event_type: String,
    /// The tenant of a tenant's event (proposals); `None`: shared configuration.
    pub tenant_id: Option<String>,
    /// The exact JSON body that is signed and sent.
    pub body: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
