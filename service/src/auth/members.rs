//! Members: the person or service behind keys and console sessions (issue 34).
//!
//! A key is a secret; a member is who holds it. Sign-off, the self-approval
//! check and every recorded decision compare members, so a second key proves
//! nothing: an operator who asks for a change cannot approve it with any key it
//! made or holds, because every key made over the API belongs to its maker's
//! member (`keys::Owner::MadeBy`). Agent keys are services with members of their
//! own; they never sign off.
//!
//! Sign-off power (`signer`) is granted in [`super::signers`].

use chrono::{DateTime, Utc};
use entity::{api_keys, members, signer_grants};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::db::page;

/// The tenant of a key or member created without one.
pub const DEFAULT_TENANT: &str = "default";

/// Why a member could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("a member named {0:?} already exists in the tenant")]
    Taken(String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

crate::closed_set! {
    /// What a member is.
    pub enum MemberKind as "member kind" {
        /// A named person: signs in, asks, approves.
        Person = "person",
        /// A service account (an agent's key): acts, never signs off.
        Service = "service",
    }
}

/// One member as lists show it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemberView {
    pub name: String,
    pub kind: MemberKind,
    pub tenant: String,
    pub signer: bool,
    /// The single sign-on identity it signs in as, if bound.
    pub oidc_subject: Option<String>,
    /// Its live keys' names (revoked ones are not listed: their number has no bound).
    pub keys: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// A page of members, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberList {
    pub members: Vec<MemberView>,
    /// Pass as `after` for the next page; `null`: this page is the last.
    pub next_after: Option<i32>,
}

fn in_tenant(tenant: &str) -> Condition {
    if tenant == DEFAULT_TENANT {
        Condition::any()
            .add(members::Column::TenantId.is_null())
            .add(members::Column::TenantId.eq(tenant))
    } else {
        Condition::all().add(members::Column::TenantId.eq(tenant))
    }
}

/// A new member; `MemberError::Taken` if the name is used in the tenant.
pub async fn insert(
    db: &impl ConnectionTrait,
    name: &str,
    kind: MemberKind,
    tenant: Option<&str>,
    now: DateTime<Utc>,
) -> Result<members::Model, MemberError> {
    let tenant = tenant.filter(|t| *t != DEFAULT_TENANT);
    members::ActiveModel {
        name: Set(name.to_owned()),
        kind: Set(kind.as_str().to_owned()),
        tenant_id: Set(tenant.map(str::to_owned)),
        signer: Set(false),
        created_at: Set(now),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| match crate::db::classify(&e) {
        crate::db::DbFailure::Taken => MemberError::Taken(name.to_owned()),
        _ => MemberError::Db(e),
    })
}

/// The live member named `name` in `tenant`.
pub async fn named(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
) -> Result<Option<members::Model>, DbErr> {
    members::Entity::find()
        .filter(members::Column::Name.eq(name))
        .filter(in_tenant(tenant))
        .filter(members::Column::DeletedAt.is_null())
        .one(db)
        .await
}

/// The live member bound to a single sign-on identity.
pub async fn bound(
    db: &impl ConnectionTrait,
    issuer: &str,
    subject: &str,
) -> Result<Option<members::Model>, DbErr> {
    members::Entity::find()
        .filter(members::Column::OidcIssuer.eq(issuer))
        .filter(members::Column::OidcSubject.eq(subject))
        .filter(members::Column::DeletedAt.is_null())
        .one(db)
        .await
}

/// The live member with row id `id`.
pub async fn live_by_id(
    db: &impl ConnectionTrait,
    id: i32,
) -> Result<Option<members::Model>, DbErr> {
    members::Entity::find_by_id(id)
        .filter(members::Column::DeletedAt.is_null())
        .one(db)
        .await
}

/// A page of the live members of `tenant` (every tenant's for `None`), oldest first,
/// with their live keys (`page.cursor`: after that page's `next_after`).
pub async fn list(
    db: &impl ConnectionTrait,
    tenant: Option<&str>,
    page: page::ByNumber,
) -> crate::error::Result<MemberList> {
    let limit = crate::error::check_limit(page.limit)?;
    let mut query = members::Entity::find()
        .filter(members::Column::DeletedAt.is_null())
        .order_by_asc(members::Column::Id)
        .limit(limit + 1);
    if let Some(tenant) = tenant {
        query = query.filter(in_tenant(tenant));
    }
    if let Some(after) = page.cursor {
        query = query.filter(members::Column::Id.gt(after));
    }
    let (rows, next_after) = page::cut(query.all(db).await?, limit, |m| m.id);
    let ids: Vec<i32> = rows.iter().map(|m| m.id).collect();
    let keys: Vec<(Option<i32>, String)> = api_keys::Entity::find()
        .select_only()
        .column(api_keys::Column::MemberId)
        .column(api_keys::Column::Name)
        .filter(api_keys::Column::MemberId.is_in(ids))
        .filter(api_keys::Column::RevokedAt.is_null())
        .filter(api_keys::Column::DeletedAt.is_null())
        .order_by_asc(api_keys::Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    let members = rows
        .into_iter()
        .map(|m| MemberView {
            keys: keys
                .iter()
                .filter(|(owner, _)| *owner == Some(m.id))
                .map(|(_, name)| name.clone())
                .collect(),
            kind: m.kind.parse().unwrap_or(MemberKind::Person),
            tenant: m.tenant_id.unwrap_or_else(|| DEFAULT_TENANT.to_owned()),
            signer: m.signer,
            oidc_subject: m.oidc_subject,
            name: m.name,
            created_at: m.created_at,
        })
        .collect();
    Ok(MemberList {
        members,
        next_after,
    })
}

/// Removes member `id` (a soft delete) when nothing keeps it any more: no live key,
/// no single sign-on identity, no sign-off power and no grant of it waiting. Called
/// when one of its keys is revoked, inside that write, so the members of revoked
/// keys do not pile up: the live members of a tenant stay bounded by its live keys
/// (plus its people who sign in or sign off). Its name stays taken, and histories
/// still name it. Whether it was removed.
pub async fn retire_if_unkept(
    db: &impl ConnectionTrait,
    id: i32,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    use sea_orm::PaginatorTrait;
    let Some(member) = live_by_id(db, id).await? else {
        return Ok(false);
    };
    if member.signer || member.oidc_subject.is_some() {
        return Ok(false);
    }
    let live_keys = api_keys::Entity::find()
        .filter(api_keys::Column::MemberId.eq(id))
        .filter(api_keys::Column::RevokedAt.is_null())
        .filter(api_keys::Column::DeletedAt.is_null())
        .count(db)
        .await?;
    // A grant waits while nobody decided it and it has not expired.
    let waiting = signer_grants::Entity::find()
        .filter(signer_grants::Column::MemberId.eq(id))
        .filter(signer_grants::Column::DecidedAt.is_null())
        .filter(signer_grants::Column::ExpiresAt.gt(now))
        .count(db)
        .await?;
    if live_keys > 0 || waiting > 0 {
        return Ok(false);
    }
    let mut gone: members::ActiveModel = member.into();
    gone.deleted_at = Set(Some(now));
    gone.update(db).await?;
    Ok(true)
}
