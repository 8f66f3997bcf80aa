//! `render_snapshots`: an agent's expected prompt render for one channel and user
//! (migration 24), compared by a change request's render check. Soft-deleted.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "render_snapshots")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub agent_id: i32,
    /// Whose users' instructions the render holds.
    pub tenant_id: String,
    pub channel: String,
    /// `""`: rendered without a user.
    pub user_id: String,
    /// The accepted render.
    pub expected: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
