//! Group writes (the reads and the shapes are `policies::groups`). A group change
//! is a guarded write that publishes every agent whose policy names the group: the
//! revision carries the members a call is decided by, so the change reaches a
//! `direct` agent's next call and a `gated` agent's `production` only through a
//! signed-off change request.

use chrono::{DateTime, Utc};
use entity::{user_group_members as members, user_groups as groups};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter, QuerySelect,
};

use crate::db::Writer;
use crate::error::{Error, Result, check_id, check_name};
use crate::policies::groups::{GroupView, MAX_GROUPS, MAX_MEMBERS, NewGroup, live, view};

/// Creates a group (409 if the tenant has a live one of that name).
pub async fn create(
    w: &Writer<'_>,
    author: &str,
    tenant: &str,
    new: NewGroup,
) -> Result<GroupView> {
    check_name("group", &new.name)?;
    for user in &new.members {
        check_id("user_id", user)?;
    }
    if new.members.len() as u64 > MAX_MEMBERS {
        return Err(Error::invalid(format!(
            "a group has at most {MAX_MEMBERS} members"
        )));
    }
    let mut txn = w.begin_for_agents().await?.by(author);
    let now = txn.now();
    let count = groups::Entity::find()
        .filter(groups::Column::TenantId.eq(tenant))
        .filter(groups::Column::DeletedAt.is_null())
        .count(&*txn)
        .await?;
    if count >= MAX_GROUPS {
        return Err(Error::refused(
            "too_many_groups",
            format!("a tenant has at most {MAX_GROUPS} groups"),
        ));
    }
    let name = new.name.clone();
    let group = groups::ActiveModel {
        tenant_id: Set(tenant.to_owned()),
        name: Set(new.name),
        created_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&*txn)
    .await
    .map_err(|e| Error::from_db(e, || format!("a group named {name:?} exists")))?;
    let mut users = new.members;
    users.sort();
    users.dedup();
    let mut added = Vec::with_capacity(users.len());
    for user in users {
        added.push(insert_member(&*txn, group.id, user, now).await?);
    }
    touch_readers(&mut txn, &name).await?;
    w.commit(txn).await?;
    Ok(view(group, added))
}

/// Has the write publish every live agent whose policy names group `name` (in any
/// tenant's calls): its next revision carries the group as this write leaves it,
/// and a gated agent's `production` keeps the old one until a change request is
/// signed off.
async fn touch_readers(write: &mut crate::registry::guard::Write, name: &str) -> Result<()> {
    use entity::agent_configurations as agents;
    let readers: Vec<(i32, String)> = agents::Entity::find()
        .select_only()
        .column(agents::Column::Id)
        .column(agents::Column::Policy)
        .filter(agents::Column::DeletedAt.is_null())
        .filter(agents::Column::Policy.is_not_null())
        .into_tuple()
        .all(&**write)
        .await?;
    for (id, policy) in readers {
        if crate::policies::bounds::group_names(&policy).contains(name) {
            write.touch(id).await?;
        }
    }
    Ok(())
}

async fn insert_member(
    db: &impl ConnectionTrait,
    group: i32,
    user: String,
    now: DateTime<Utc>,
) -> Result<members::Model> {
    Ok(members::ActiveModel {
        group_id: Set(group),
        user_id: Set(user),
        created_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await?)
}

/// Adds `user` to the group (a member already is answered as it is).
pub async fn add(
    w: &Writer<'_>,
    author: &str,
    tenant: &str,
    name: &str,
    user: &str,
) -> Result<GroupView> {
    check_name("group", name)?;
    check_id("user_id", user)?;
    let mut txn = w.begin_for_agents().await?.by(author);
    let now = txn.now();
    let (group, current) = live(&*txn, tenant, name).await?;
    let mut all = current.clone();
    if !current.iter().any(|m| m.user_id == user) {
        if current.len() as u64 >= MAX_MEMBERS {
            return Err(Error::refused(
                "too_many_members",
                format!("a group has at most {MAX_MEMBERS} members"),
            ));
        }
        all.push(insert_member(&*txn, group.id, user.to_owned(), now).await?);
    }
    touch_readers(&mut txn, name).await?;
    w.commit(txn).await?;
    Ok(view(group, all))
}

/// Removes `user` from the group (soft; 404 if not a member).
pub async fn remove(
    w: &Writer<'_>,
    author: &str,
    tenant: &str,
    name: &str,
    user: &str,
) -> Result<GroupView> {
    check_name("group", name)?;
    check_id("user_id", user)?;
    let mut txn = w.begin_for_agents().await?.by(author);
    let now = txn.now();
    let (group, current) = live(&*txn, tenant, name).await?;
    let Some(member) = current.iter().find(|m| m.user_id == user).cloned() else {
        return Err(Error::not_found(format!(
            "{user:?} is not in group {name:?}"
        )));
    };
    let mut gone: members::ActiveModel = member.into();
    gone.deleted_at = Set(Some(now));
    gone.update(&*txn).await?;
    touch_readers(&mut txn, name).await?;
    w.commit(txn).await?;
    let rest = current.into_iter().filter(|m| m.user_id != user).collect();
    Ok(view(group, rest))
}

/// Deletes the group and its memberships (soft).
pub async fn delete(w: &Writer<'_>, author: &str, tenant: &str, name: &str) -> Result<GroupView> {
    check_name("group", name)?;
    let mut txn = w.begin_for_agents().await?.by(author);
    let now = txn.now();
    let (group, current) = live(&*txn, tenant, name).await?;
    members::Entity::update_many()
        .col_expr(
            members::Column::DeletedAt,
            sea_orm::sea_query::Expr::value(Some(now)),
        )
        .filter(members::Column::GroupId.eq(group.id))
        .filter(members::Column::DeletedAt.is_null())
        .exec(&*txn)
        .await?;
    let mut gone: groups::ActiveModel = group.clone().into();
    gone.deleted_at = Set(Some(now));
    gone.update(&*txn).await?;
    touch_readers(&mut txn, name).await?;
    w.commit(txn).await?;
    Ok(view(group, current))
}
