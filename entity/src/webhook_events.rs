//! `webhook_events`: the outbox; one row per event, written in the change's
//! transaction; the delivery job derives its deliveries and stamps `fanned_out_at`.

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
    /// When its deliveries were derived (`None`: the delivery job has yet to).
    pub fanned_out_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
