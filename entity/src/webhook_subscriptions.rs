//! `webhook_subscriptions`: where a tenant's webhooks go, which events, and the
//! signing secret (sealed at rest). Deletes are soft.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "webhook_subscriptions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub tenant_id: String,
    pub url: String,
    /// `*` (every type) or event types separated by commas.
    pub events: String,
    /// The `whsec_...` secret, sealed with the secrets keyring.
    #[serde(skip_serializing)]
    pub secret: String,
    pub description: Option<String>,
    /// `active` or `disabled`.
    pub state: String,
    pub disabled_reason: Option<String>,
    /// Failed attempts in a row since the last success.
    pub failures: i32,
    pub created_by: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
