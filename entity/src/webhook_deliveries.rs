//! `webhook_deliveries`: one event for one subscription, until it is delivered or
//! its attempts run out.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub event_id: i32,
    pub subscription_id: i32,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: i32,
    pub next_attempt_at: DateTimeUtc,
    /// Set while a process is posting it; past it, another may claim it.
    pub lease_until: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
