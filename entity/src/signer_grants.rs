//! `signer_grants`: each grant or revocation of a member's sign-off power, with
//! who asked, who decided and why (migration 21). A grant over the API waits for
//! another signer; one made on the database is decided at once by `database`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "signer_grants")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub member_id: i32,
    /// `true` grants sign-off power, `false` takes it away.
    pub grant: bool,
    /// `pending`, `approved`, `declined` or `expired`.
    pub state: String,
    pub reason: Option<String>,
    /// The requesting member's name (`database` for the CLI).
    pub requested_by: String,
    pub requested_member_id: Option<i32>,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub decided_by: Option<String>,
    pub decided_member_id: Option<i32>,
    pub decided_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
