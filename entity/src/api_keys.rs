//! `api_keys`: who may call the HTTP API. Only a SHA-256 hash of each key is kept.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Unique within the key's tenant (migration 15).
    pub name: String,
    /// `operator`, `admin`, `agent` or `approver`.
    pub role: String,
    /// The public part of the key, used to find the row; not secret.
    #[sea_orm(unique)]
    pub prefix: String,
    /// Lowercase hex SHA-256 of the whole key.
    pub key_hash: String,
    /// The key's tenant; `None` is the default tenant (and every operator key).
    pub tenant_id: Option<String>,
    /// An agent key scoped to this agent (by name); `None` reaches every agent.
    pub agent: Option<String>,
    /// The member whose key it is (migration 21; every key has one).
    pub member_id: Option<i32>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
