//! `console_sessions`: web console sign-ins. The browser holds a random token; only
//! its SHA-256 is kept here, with the key the session acts as.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "console_sessions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Lowercase hex SHA-256 of the cookie's token.
    #[sea_orm(unique)]
    pub token_hash: String,
    /// The key signed in with (its row, never the key).
    pub api_key_id: i32,
    /// Every form that changes something carries this token.
    pub csrf_token: String,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    /// Signed out; a session is never deleted.
    pub ended_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
