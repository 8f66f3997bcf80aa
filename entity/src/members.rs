//! `members`: the person or service behind keys and console sessions. Sign-off,
//! self-approval checks and histories compare members, never keys (migration 21).

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "members")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Unique within the member's tenant.
    pub name: String,
    /// `person` or `service`.
    pub kind: String,
    /// `None`: the default tenant, and every operator's member.
    pub tenant_id: Option<String>,
    /// May sign off change requests (granted, never minted: `signer_grants`).
    pub signer: bool,
    /// The single sign-on identity this person signs in as.
    pub oidc_issuer: Option<String>,
    pub oidc_subject: Option<String>,
    pub created_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
