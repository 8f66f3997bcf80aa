//! `webhook_attempts`: the delivery log, one row per attempt (pruned to the newest
//! per subscription).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "webhook_attempts")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub delivery_id: i32,
    pub subscription_id: i32,
    /// 1 for the first attempt of the delivery.
    pub attempt: i32,
    /// The HTTP status, if an answer came.
    pub status: Option<i32>,
    pub duration_ms: i32,
    pub error: Option<String>,
    /// The first bytes of the answer's body.
    pub excerpt: Option<String>,
    pub at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
