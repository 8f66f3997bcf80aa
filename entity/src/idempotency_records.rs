//! `idempotency_records`: the answer to an admin write sent with an
//! `Idempotency-Key`, per tenant, for 24 hours.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "idempotency_records")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub tenant_id: String,
    pub key: String,
    /// SHA-256 of the method, the path with its query, and the body.
    pub fingerprint: String,
    /// The answer's status; `None` while the request runs, or when the process
    /// stopped between the commit and storing the answer.
    pub status: Option<i32>,
    pub body: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
