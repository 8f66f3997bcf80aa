//! Groups of users per tenant, for policies (`principal in Group::"ops"`). An
//! admin's list; a user is an agent's `user_id`. A revision carries the members
//! of the groups its policy names (`releases::content::Groups`), and a call is
//! decided by those: a group change is a guarded write that publishes every agent
//! whose policy names the group, so it reaches a `direct` agent's next call and a
//! `gated` agent's `production` only through a signed-off change request. Deletes
//! are soft. The writes are `agents::groups` (they publish agents, a layer up).

use chrono::{DateTime, Utc};
use entity::{user_group_members as members, user_groups as groups};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result, check_name};

/// The most groups a tenant may hold, and members a group.
pub const MAX_GROUPS: u64 = 1000;
pub const MAX_MEMBERS: u64 = 10_000;

/// A group and its members.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    pub name: String,
    /// User ids, sorted.
    pub members: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// The tenant's groups, by name.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupView>,
}

/// The body of `POST /v1/groups`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGroup {
    /// Lowercase letters, digits and `_`, as tool names.
    pub name: String,
    /// User ids to start with.
    #[serde(default)]
    pub members: Vec<String>,
}

/// The names of the live groups `user` is a live member of, in `tenant`.
pub async fn of(db: &impl ConnectionTrait, tenant: &str, user: &str) -> Result<Vec<String>> {
    let names: Vec<String> = groups::Entity::find()
        .select_only()
        .column(groups::Column::Name)
        .inner_join(members::Entity)
        .filter(groups::Column::TenantId.eq(tenant))
        .filter(groups::Column::DeletedAt.is_null())
        .filter(members::Column::UserId.eq(user))
        .filter(members::Column::DeletedAt.is_null())
        .order_by_asc(groups::Column::Name)
        .into_tuple()
        .all(db)
        .await?;
    Ok(names)
}

/// The groups of `user` (none when the call names no user): what a policy's
/// principal is `in`.
pub async fn of_user(
    db: &impl ConnectionTrait,
    tenant: &str,
    user: Option<&str>,
) -> Result<Vec<String>> {
    match user {
        Some(user) => of(db, tenant, user).await,
        None => Ok(Vec::new()),
    }
}

/// The tenant's live groups with their live members.
pub async fn list(db: &DatabaseConnection, tenant: &str) -> Result<GroupList> {
    let rows = groups::Entity::find()
        .filter(groups::Column::TenantId.eq(tenant))
        .filter(groups::Column::DeletedAt.is_null())
        .order_by_asc(groups::Column::Name)
        .find_with_related(members::Entity)
        .all(db)
        .await?;
    let groups = rows
        .into_iter()
        .map(|(group, members)| view(group, members))
        .collect();
    Ok(GroupList { groups })
}

pub(crate) fn view(group: groups::Model, members: Vec<members::Model>) -> GroupView {
    let mut names: Vec<String> = members
        .into_iter()
        .filter(|m| m.deleted_at.is_none())
        .map(|m| m.user_id)
        .collect();
    names.sort();
    GroupView {
        name: group.name,
        members: names,
        created_at: group.created_at,
    }
}

/// The tenant's live group `name` and its live members (404 when there is none).
pub(crate) async fn live(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
) -> Result<(groups::Model, Vec<members::Model>)> {
    let group = groups::Entity::find()
        .filter(groups::Column::TenantId.eq(tenant))
        .filter(groups::Column::Name.eq(name))
        .filter(groups::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no group named {name:?}")))?;
    let members = members::Entity::find()
        .filter(members::Column::GroupId.eq(group.id))
        .filter(members::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    Ok((group, members))
}

/// One group.
pub async fn get(db: &DatabaseConnection, tenant: &str, name: &str) -> Result<GroupView> {
    check_name("group", name)?;
    let (group, members) = live(db, tenant, name).await?;
    Ok(view(group, members))
}
