//! `revision_signals`: what loadout counted itself per tenant, revision and signal
//! (tool calls, invalid-argument refusals, decisions, declines, executions, failed
//! executions), upserted in the transaction of the event.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "revision_signals")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub tenant_id: String,
    pub agent_id: i32,
    pub revision_id: i32,
    pub signal: String,
    pub count: i64,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
