//! Sign-off power is granted, never minted (issue 34, item 2). A member's
//! `signer` is set on the database (`loadout members grant-signoff`, and the
//! first operator key `serve` makes), or over the API by a grant an operator
//! requests and *another* signer approves (never the member it grants, never the
//! requester). Every grant and revocation is a `signer_grants` row: the history of
//! who may sign off.
//!
//! Power is per tenant: a signer of tenant `tb` decides grants of `tb`'s people
//! only (another tenant's grant is 404 to it), and signs off no change request
//! (those move the shared configuration: the default tenant's signers and
//! operators sign them off).

use chrono::{DateTime, Utc};
use entity::{api_keys, members, signer_grants};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::keys::{DEFAULT_TENANT, KeyError, Principal, Role};
use super::members::{MemberKind, named};
use crate::db::Writer;
use crate::db::idempotency::Pending;
use crate::error::{Error, Kind as ErrorKind, Result, check_size};
use crate::vocab::MAX_TEXT_BYTES;

crate::closed_set! {
    /// Where a signer grant is.
    pub enum GrantState as "signer grant state" {
        /// Waiting for another signer.
        Pending = "pending",
        /// Decided: the member's power changed.
        Approved = "approved",
        /// Declined (or withdrawn by its requester); nothing changed.
        Declined = "declined",
        /// Nobody decided within its lifetime.
        Expired = "expired",
    }
}

/// Who decides on the database: the CLI's name in every history.
pub const DATABASE: &str = "database";

/// How long a signer grant waits for a decision.
pub const GRANT_LIFETIME: chrono::Duration = chrono::Duration::days(7);

/// One grant or revocation of sign-off power.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GrantView {
    pub id: i32,
    pub member: String,
    /// `true` grants, `false` revokes.
    pub grant: bool,
    pub state: GrantState,
    pub reason: Option<String>,
    pub requested_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// A page of grants, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantList {
    pub grants: Vec<GrantView>,
    /// Pass as `before` for the next (older) page; `null`: this page is the last.
    pub next_before: Option<i32>,
}

/// The body of a grant request.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// Why, kept with the grant.
    pub reason: Option<String>,
    /// The member's tenant (`default` if absent).
    pub tenant: Option<String>,
}

/// Sets a member's power and records the decision, inside `db`'s write.
async fn set_signer(
    db: &impl ConnectionTrait,
    member: members::Model,
    grant: bool,
) -> std::result::Result<(), DbErr> {
    if member.signer != grant {
        let mut active: members::ActiveModel = member.into();
        active.signer = Set(grant);
        active.update(db).await?;
    }
    Ok(())
}

/// Grants (`grant`) or revokes `member`'s power on the database, decided at once
/// by `database`, and records why: inside the caller's write.
async fn decide_on_database(
    db: &impl ConnectionTrait,
    member: members::Model,
    grant: bool,
    reason: Option<String>,
    now: DateTime<Utc>,
) -> std::result::Result<(), DbErr> {
    signer_grants::ActiveModel {
        member_id: Set(member.id),
        grant: Set(grant),
        state: Set(GrantState::Approved.as_str().to_owned()),
        reason: Set(reason),
        requested_by: Set(DATABASE.to_owned()),
        created_at: Set(now),
        expires_at: Set(now),
        decided_by: Set(Some(DATABASE.to_owned())),
        decided_at: Set(Some(now)),
        ..Default::default()
    }
    .insert(db)
    .await?;
    set_signer(db, member, grant).await
}

/// Grants (or with `grant` false, revokes) sign-off power on the database: the
/// CLI's `members grant-signoff` and `revoke-signoff`, decided at once and
/// recorded as by `database`.
pub async fn set_signer_on_database(
    db: &DatabaseConnection,
    tenant: &str,
    name: &str,
    grant: bool,
    reason: Option<&str>,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let txn = crate::db::begin_write(db).await?;
    let member = named(&txn, tenant, name)
        .await?
        .ok_or_else(|| KeyError::NoMember(name.to_owned()))?;
    decide_on_database(&txn, member, grant, reason.map(str::to_owned), now).await?;
    // Cached principals carry `signer`: the generation makes every process re-read.
    crate::db::generation::bump(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// The first operator key's member may sign off: granted inside the bootstrap's
/// write, as the key is made.
pub async fn grant_first(
    db: &impl ConnectionTrait,
    key_name: &str,
    now: DateTime<Utc>,
) -> std::result::Result<(), KeyError> {
    let member = named(db, DEFAULT_TENANT, key_name)
        .await?
        .ok_or_else(|| KeyError::NoMember(key_name.to_owned()))?;
    let reason = Some("the first operator key".to_owned());
    Ok(decide_on_database(db, member, true, reason, now).await?)
}

/// Joins member `from` into `into` (both of `tenant`): `from`'s keys become
/// `into`'s, `from` is soft-deleted, and `into` keeps sign-off power if either
/// had it (recorded as a grant by `database`). On the database only.
pub async fn merge(
    db: &DatabaseConnection,
    tenant: &str,
    into: &str,
    from: &str,
    now: DateTime<Utc>,
) -> anyhow::Result<usize> {
    anyhow::ensure!(into != from, "a member cannot be merged into itself");
    let txn = crate::db::begin_write(db).await?;
    let target = named(&txn, tenant, into)
        .await?
        .ok_or_else(|| KeyError::NoMember(into.to_owned()))?;
    let source = named(&txn, tenant, from)
        .await?
        .ok_or_else(|| KeyError::NoMember(from.to_owned()))?;
    let moved = api_keys::Entity::update_many()
        .col_expr(
            api_keys::Column::MemberId,
            sea_orm::sea_query::Expr::value(target.id),
        )
        .filter(api_keys::Column::MemberId.eq(source.id))
        .exec(&txn)
        .await?
        .rows_affected;
    if source.signer && !target.signer {
        let reason = Some(format!("merged with {from:?}, a signer"));
        decide_on_database(&txn, target, true, reason, now).await?;
    }
    let mut gone: members::ActiveModel = source.into();
    gone.deleted_at = Set(Some(now));
    gone.update(&txn).await?;
    crate::db::generation::bump(&txn).await?;
    txn.commit().await?;
    Ok(usize::try_from(moved).unwrap_or(usize::MAX))
}

/// Who may request a grant over the API: an operator.
fn may_request(who: &Principal) -> Result<()> {
    match who.role {
        Role::Operator => Ok(()),
        _ => Err(Error::forbidden("an operator key")),
    }
}

const DECIDERS: &str =
    "an operator key or approver key of a signer (sign-off power is granted by another signer)";

/// Who may decide a grant: a signer's operator or approver key.
fn may_decide(who: &Principal) -> Result<()> {
    match who.signer && matches!(who.role, Role::Operator | Role::Approver) {
        true => Ok(()),
        false => Err(Error::forbidden(DECIDERS)),
    }
}

fn grant_state(row: &signer_grants::Model, now: DateTime<Utc>) -> GrantState {
    let stored = row.state.parse().unwrap_or(GrantState::Expired);
    match stored == GrantState::Pending && row.expires_at <= now {
        true => GrantState::Expired,
        false => stored,
    }
}

async fn grant_view(
    db: &impl ConnectionTrait,
    row: signer_grants::Model,
    now: DateTime<Utc>,
) -> Result<GrantView> {
    let member = members::Entity::find_by_id(row.member_id)
        .one(db)
        .await?
        .map(|m| m.name)
        .unwrap_or_default();
    Ok(view_of(row, member, now))
}

/// A grant as the API shows it, its member named `member`.
fn view_of(row: signer_grants::Model, member: String, now: DateTime<Utc>) -> GrantView {
    GrantView {
        state: grant_state(&row, now),
        id: row.id,
        member,
        grant: row.grant,
        reason: row.reason,
        requested_by: row.requested_by,
        created_at: row.created_at,
        expires_at: row.expires_at,
        decided_by: row.decided_by,
        decided_at: row.decided_at,
    }
}

/// Asks that member `name` may sign off; pending until another signer approves.
pub async fn request_grant(
    db: &DatabaseConnection,
    who: &Principal,
    name: &str,
    request: GrantRequest,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<GrantView> {
    may_request(who)?;
    if let Some(reason) = &request.reason {
        check_size("reason", reason, MAX_TEXT_BYTES)?;
    }
    let tenant = request.tenant.as_deref().unwrap_or(DEFAULT_TENANT);
    let txn = crate::db::begin_write(db).await?;
    crate::db::idempotency::record_if(&txn, key).await?;
    let member = named(&txn, tenant, name)
        .await?
        .ok_or_else(|| Error::not_found(format!("no member named {name:?}")))?;
    if member.kind != MemberKind::Person.as_str() {
        return Err(Error::refused(
            "not_a_person",
            format!("{name:?} is a service: only people sign off"),
        ));
    }
    if member.signer {
        return Err(Error::conflict(format!("{name:?} already signs off")));
    }
    let row = signer_grants::ActiveModel {
        member_id: Set(member.id),
        grant: Set(true),
        state: Set(GrantState::Pending.as_str().to_owned()),
        reason: Set(request.reason),
        requested_by: Set(who.member.clone()),
        requested_member_id: Set(Some(who.member_id)),
        created_at: Set(now),
        expires_at: Set(now + GRANT_LIFETIME),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    let view = grant_view(&txn, row, now).await?;
    txn.commit().await?;
    Ok(view)
}

/// Approves (`approve` true) or declines a pending grant. Approving needs a
/// signer who is neither the requester nor the member it grants; the requester
/// may decline (withdraw) it.
pub async fn decide_grant(
    w: &Writer<'_>,
    who: &Principal,
    id: i32,
    approve: bool,
) -> Result<GrantView> {
    // The role first: no grant is read for a key that could never decide one (the
    // requester, who may withdraw, is an operator).
    if !matches!(who.role, Role::Operator | Role::Approver) {
        return Err(Error::forbidden(DECIDERS));
    }
    let txn = crate::db::begin_write(w.db).await?;
    crate::db::idempotency::record_if(&txn, w.key).await?;
    let row = signer_grants::Entity::find_by_id(id)
        .one(&txn)
        .await?
        .ok_or_else(|| Error::not_found(format!("no signer grant {id}")))?;
    let member = members::Entity::find_by_id(row.member_id)
        .one(&txn)
        .await?
        .ok_or_else(|| Error::internal("a signer grant without its member"))?;
    // Sign-off power is per tenant: only an operator reaches another tenant's
    // people, and a grant outside the caller's tenant is not there for it.
    let tenant = member.tenant_id.as_deref().unwrap_or(DEFAULT_TENANT);
    if who.role != Role::Operator && tenant != who.tenant() {
        return Err(Error::not_found(format!("no signer grant {id}")));
    }
    let withdrawing = !approve && row.requested_member_id == Some(who.member_id);
    if !withdrawing {
        may_decide(who)?;
    }
    match grant_state(&row, w.now) {
        GrantState::Pending => {}
        state => {
            return Err(Error::conflict(format!(
                "signer grant {id} is already {state}"
            )));
        }
    }
    if approve && (row.requested_member_id == Some(who.member_id) || row.member_id == who.member_id)
    {
        return Err(Error::new(
            ErrorKind::Forbidden,
            "self_approval",
            "a signer grant is approved by another signer: neither its requester nor the member it grants",
        ));
    }
    let state = if approve {
        GrantState::Approved
    } else {
        GrantState::Declined
    };
    let mut active: signer_grants::ActiveModel = row.into();
    active.state = Set(state.as_str().to_owned());
    active.decided_by = Set(Some(who.member.clone()));
    active.decided_member_id = Set(Some(who.member_id));
    active.decided_at = Set(Some(w.now));
    let decided = active.update(&txn).await?;
    if approve {
        let grant = decided.grant;
        set_signer(&txn, member, grant).await?;
        let bumped = crate::db::generation::bump(&txn).await?;
        let view = grant_view(&txn, decided, w.now).await?;
        txn.commit().await?;
        w.generation.observe(bumped);
        return Ok(view);
    }
    let view = grant_view(&txn, decided, w.now).await?;
    txn.commit().await?;
    Ok(view)
}

/// A page of grants and revocations, newest first, of one member if named
/// (`page.cursor`: older than that grant).
pub async fn grants(
    db: &impl ConnectionTrait,
    member: Option<i32>,
    page: crate::db::page::ByNumber,
    now: DateTime<Utc>,
) -> Result<GrantList> {
    let limit = crate::error::check_limit(page.limit)?;
    let mut query = signer_grants::Entity::find()
        .order_by_desc(signer_grants::Column::Id)
        .limit(limit + 1);
    if let Some(member) = member {
        query = query.filter(signer_grants::Column::MemberId.eq(member));
    }
    if let Some(before) = page.cursor {
        query = query.filter(signer_grants::Column::Id.lt(before));
    }
    let (rows, next_before) = crate::db::page::cut(query.all(db).await?, limit, |g| g.id);
    // The members' names in one read (removed members too: a history names them).
    let ids: Vec<i32> = rows.iter().map(|g| g.member_id).collect();
    let names: std::collections::BTreeMap<i32, String> = members::Entity::find()
        .select_only()
        .column(members::Column::Id)
        .column(members::Column::Name)
        .filter(members::Column::Id.is_in(ids))
        .into_tuple::<(i32, String)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let grants = rows
        .into_iter()
        .map(|row| {
            let member = names.get(&row.member_id).cloned().unwrap_or_default();
            view_of(row, member, now)
        })
        .collect();
    Ok(GrantList {
        grants,
        next_before,
    })
}
