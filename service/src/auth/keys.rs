//! API keys: `lo_<prefix>_<secret>`, stored only as a SHA-256 hash.
//!
//! The prefix (12 hex digits, random) is public and finds the row; the secret
//! (32 random bytes) never leaves the creator's terminal. Keys are 256-bit random
//! values, so one SHA-256 is enough (a slow password hash guards low-entropy
//! secrets, which these are not). The stored and presented hashes are compared
//! in constant time. Revoking sets `revoked_at`; rows are never deleted.

use chrono::{DateTime, Utc};
use entity::api_keys;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, Set,
};
use serde::Serialize;

crate::closed_set! {
    /// What a key may do.
    #[derive(clap::ValueEnum)]
    pub enum Role as "role" {
        /// The instance's operator: writes the shared configuration (agents, souls,
        /// templates, tools, links, channels, connectors) that every tenant's agents
        /// run, and manages keys of every tenant. Belongs to no tenant; where it
        /// touches a tenant's data (proposals, users' instructions) it acts in the
        /// default tenant, as every key did before tenants existed.
        Operator = "operator",
        /// Manages its own tenant: keys, users' instructions and preferences,
        /// proposals and approvals; reads the shared configuration.
        Admin = "admin",
        /// Read prompts and tools; propose tool calls.
        Agent = "agent",
        /// Approve, decline, retry and read its tenant's proposals; nothing else.
        Approver = "approver",
    }
}

pub use super::members::DEFAULT_TENANT;

/// The caller behind a valid key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The key's row id (what a console session refers to).
    pub key_id: i32,
    pub key_name: String,
    /// The member whose key it is: who the caller is. Sign-off, self-approval and
    /// every recorded decision compare and show members, never keys (one person
    /// may hold several keys).
    pub member_id: i32,
    pub member: String,
    /// Whether the member may sign off change requests (granted, never minted).
    pub signer: bool,
    pub role: Role,
    pub tenant_id: Option<String>,
    /// The one agent a scoped agent key reaches; `None` reaches every agent.
    pub agent: Option<String>,
}

impl Role {
    /// Whether this role manages a tenant (its keys, users' instructions, proposals).
    pub fn manages_tenant(self) -> bool {
        matches!(self, Role::Admin | Role::Operator)
    }
}

impl Principal {
    /// Whoever holds the database, acting through the CLI as `name`: an operator
    /// of no member (id 0, which no row has), never a signer. A change request
    /// it makes is signed off by any signer; the database is the root of trust.
    pub fn database(name: &str) -> Self {
        Principal {
            key_id: 0,
            key_name: name.to_owned(),
            member_id: 0,
            member: name.to_owned(),
            signer: false,
            role: Role::Operator,
            tenant_id: None,
            agent: None,
        }
    }

    /// Whether this key reaches `agent`: always, unless it is scoped to another.
    pub fn reaches(&self, agent: &str) -> bool {
        self.agent.as_deref().is_none_or(|scope| scope == agent)
    }

    /// The tenant every object this key touches belongs to; never taken from a request.
    pub fn tenant(&self) -> &str {
        self.tenant_id.as_deref().unwrap_or(DEFAULT_TENANT)
    }
}

/// One key as `keys list` shows it: never the secret or the hash.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct KeyInfo {
    pub name: String,
    pub role: String,
    pub prefix: String,
    pub tenant: String,
    /// The agent a scoped agent key reaches (`None`: every agent).
    pub agent: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "key name {0:?} is not valid: use 1 to 64 of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
    )]
    InvalidName(String),
    #[error(
        "tenant {0:?} is not valid: use 1 to 64 of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
    )]
    InvalidTenant(String),
    #[error("a key or member named {0:?} already exists in the tenant")]
    NameTaken(String),
    #[error("no member named {0:?} in the tenant")]
    NoMember(String),
    #[error("no key named {0:?}")]
    NotFound(String),
    #[error("only agent keys are scoped to an agent (admin and approver keys reach every agent)")]
    ScopeNeedsAgentRole,
    #[error("operator keys belong to no tenant: create one without a tenant")]
    OperatorHasNoTenant,
    #[error("no agent named {0:?} to scope the key to")]
    UnknownAgent(String),
    #[error(
        "this tenant holds {0} live keys, the most it may (`--max-keys-per-tenant`): revoke one first"
    )]
    LimitReached(u64),
    #[error("the system random number generator failed: {0}")]
    Random(String),
    #[error(transparent)]
    Db(#[from] DbErr),
}

pub use crate::vocab::valid_name;

use crate::digest::hex;

/// Lowercase hex SHA-256 of a presented key (what the database stores).
pub fn hash(key: &str) -> String {
    crate::digest::sha256_hex(key)
}

/// Equality that takes the same time wherever the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The prefix of a well-formed key, without touching the database.
fn prefix_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("lo_")?;
    let (prefix, secret) = rest.split_once('_')?;
    let hexish = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hexish(prefix, 12) && hexish(secret, 64)).then_some(prefix)
}

/// Whose a new key is.
#[derive(Clone, Copy, Debug)]
pub enum Owner<'a> {
    /// A new member named as the key: a key made on the database (`keys create`,
    /// the first operator key), a person unless it is an agent key.
    Own,
    /// The member of the key that made it over the API: whoever holds a key's
    /// secret is its maker, so a key never belongs to anyone else and never
    /// carries power its maker's member lacks. An agent key is a service, and a
    /// key an operator makes in another tenant is that tenant's person (how a
    /// tenant gets its first admin): each gets a new member of its own, named as
    /// the key, which signs off nothing until another signer grants it.
    MadeBy(&'a Principal),
    /// An existing member of the key's tenant, by name (`keys create --member`).
    Member(&'a str),
}

/// Creates a key and returns it; this is the only time the whole key exists.
pub async fn create(
    db: &impl ConnectionTrait,
    name: &str,
    role: Role,
    now: DateTime<Utc>,
) -> Result<String, KeyError> {
    create_for_tenant(db, name, role, None, now).await
}

/// Creates a key of `tenant` (the default tenant when `None`) and returns it.
pub async fn create_for_tenant(
    db: &impl ConnectionTrait,
    name: &str,
    role: Role,
    tenant: Option<&str>,
    now: DateTime<Utc>,
) -> Result<String, KeyError> {
    create_scoped(db, name, role, tenant, None, now).await
}

/// Creates a key with a member of its own; an agent key with `agent` reaches
/// that agent only.
pub async fn create_scoped(
    db: &impl ConnectionTrait,
    name: &str,
    role: Role,
    tenant: Option<&str>,
    agent: Option<&str>,
    now: DateTime<Utc>,
) -> Result<String, KeyError> {
    create_owned(db, name, role, tenant, agent, Owner::Own, now).await
}

/// Creates a key over the API or the console for `maker` (see [`Owner::MadeBy`]),
/// the member (if new) and the key in one write; refused when the key's tenant
/// already holds `most` live keys.
pub async fn create_by(
    db: &sea_orm::DatabaseConnection,
    maker: &Principal,
    new: (&str, Role),
    tenant: Option<&str>,
    agent: Option<&str>,
    most: u64,
    now: DateTime<Utc>,
) -> Result<String, KeyError> {
    let (name, role) = new;
    let txn = crate::db::begin_write(db).await?;
    let made = async {
        let counted = match role {
            Role::Operator => DEFAULT_TENANT,
            _ => tenant.unwrap_or(DEFAULT_TENANT),
        };
        crate::db::bounds::serialize(&txn, "api_keys", counted).await?;
        if live_in_tenant(&txn, counted).await? >= most {
            return Err(KeyError::LimitReached(most));
        }
        create_owned(&txn, name, role, tenant, agent, Owner::MadeBy(maker), now).await
    };
    match made.await {
        Ok(key) => {
            txn.commit().await?;
            Ok(key)
        }
        Err(e) => {
            // Ended here, not left for the pool to find open.
            txn.rollback().await.ok();
            Err(e)
        }
    }
}

/// The live (not revoked, not deleted) keys of `tenant`.
async fn live_in_tenant(db: &impl ConnectionTrait, tenant: &str) -> Result<u64, DbErr> {
    use sea_orm::PaginatorTrait;
    let in_tenant = match tenant {
        DEFAULT_TENANT => sea_orm::Condition::any()
            .add(api_keys::Column::TenantId.is_null())
            .add(api_keys::Column::TenantId.eq(tenant)),
        _ => sea_orm::Condition::all().add(api_keys::Column::TenantId.eq(tenant)),
    };
    api_keys::Entity::find()
        .filter(in_tenant)
        .filter(api_keys::Column::RevokedAt.is_null())
        .filter(api_keys::Column::DeletedAt.is_null())
        .count(db)
        .await
}

/// Creates a key owned as `owner` says. The member and the key are written on
/// `db`: a caller that needs both or neither passes its write transaction.
pub async fn create_owned(
    db: &impl ConnectionTrait,
    name: &str,
    role: Role,
    tenant: Option<&str>,
    agent: Option<&str>,
    owner: Owner<'_>,
    now: DateTime<Utc>,
) -> Result<String, KeyError> {
    if let Some(agent) = agent {
        if role != Role::Agent {
            return Err(KeyError::ScopeNeedsAgentRole);
        }
        let live = entity::agent_configurations::Entity::find()
            .filter(entity::agent_configurations::Column::Name.eq(agent))
            .filter(entity::agent_configurations::Column::DeletedAt.is_null())
            .one(db)
            .await?;
        if live.is_none() {
            return Err(KeyError::UnknownAgent(agent.to_owned()));
        }
    }
    if !valid_name(name) {
        return Err(KeyError::InvalidName(name.to_owned()));
    }
    // The default tenant is stored as no tenant, the one way it always was.
    let tenant = tenant.filter(|t| *t != DEFAULT_TENANT);
    if role == Role::Operator && tenant.is_some() {
        return Err(KeyError::OperatorHasNoTenant);
    }
    if let Some(tenant) = tenant
        && !valid_name(tenant)
    {
        return Err(KeyError::InvalidTenant(tenant.to_owned()));
    }
    let kind = match role {
        Role::Agent => super::members::MemberKind::Service,
        _ => super::members::MemberKind::Person,
    };
    let member_id = match owner {
        Owner::MadeBy(maker)
            if role != Role::Agent && maker.tenant() == tenant.unwrap_or(DEFAULT_TENANT) =>
        {
            maker.member_id
        }
        Owner::Member(member) => {
            super::members::named(db, tenant.unwrap_or(DEFAULT_TENANT), member)
                .await?
                .ok_or_else(|| KeyError::NoMember(member.to_owned()))?
                .id
        }
        // The new member is named as the key: a name taken by either is taken.
        Owner::Own | Owner::MadeBy(_) => {
            match super::members::insert(db, name, kind, tenant, now).await {
                Ok(member) => member.id,
                Err(super::members::MemberError::Taken(_)) => {
                    return Err(KeyError::NameTaken(name.to_owned()));
                }
                Err(super::members::MemberError::Db(e)) => return Err(KeyError::Db(e)),
            }
        }
    };
    let mut random = [0u8; 6 + 32];
    getrandom::fill(&mut random).map_err(|e| KeyError::Random(e.to_string()))?;
    let prefix = hex(&random[..6]);
    let key = format!("lo_{prefix}_{}", hex(&random[6..]));
    api_keys::ActiveModel {
        name: Set(name.to_owned()),
        role: Set(role.as_str().to_owned()),
        prefix: Set(prefix),
        key_hash: Set(hash(&key)),
        tenant_id: Set(tenant.map(str::to_owned)),
        agent: Set(agent.map(str::to_owned)),
        member_id: Set(Some(member_id)),
        created_at: Set(now),
        updated_at: Set(now),
        revoked_at: Set(None),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| match crate::db::classify(&e) {
        // The unique index on (tenant, name) decides a race; no check-then-insert.
        crate::db::DbFailure::Taken => KeyError::NameTaken(name.to_owned()),
        _ => KeyError::Db(e),
    })?;
    Ok(key)
}

/// Every key, oldest first.
pub async fn list(db: &impl ConnectionTrait) -> Result<Vec<KeyInfo>, DbErr> {
    Ok(api_keys::Entity::find()
        .filter(api_keys::Column::DeletedAt.is_null())
        .order_by_asc(api_keys::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(|k| KeyInfo {
            name: k.name,
            role: k.role,
            prefix: k.prefix,
            tenant: k.tenant_id.unwrap_or_else(|| DEFAULT_TENANT.to_owned()),
            agent: k.agent,
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        })
        .collect())
}

/// The keys of one tenant, oldest first (a key without a tenant is the default's).
pub async fn list_in_tenant(
    db: &impl ConnectionTrait,
    tenant: &str,
) -> Result<Vec<KeyInfo>, DbErr> {
    Ok(list(db)
        .await?
        .into_iter()
        .filter(|k| k.tenant == tenant)
        .collect())
}

/// The key named `name` in `tenant` (names are unique per tenant; a key without a
/// tenant is the default tenant's).
async fn named(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
) -> Result<api_keys::Model, KeyError> {
    let in_tenant = if tenant == DEFAULT_TENANT {
        sea_orm::Condition::any()
            .add(api_keys::Column::TenantId.is_null())
            .add(api_keys::Column::TenantId.eq(tenant))
    } else {
        sea_orm::Condition::all().add(api_keys::Column::TenantId.eq(tenant))
    };
    api_keys::Entity::find()
        .filter(api_keys::Column::Name.eq(name))
        .filter(in_tenant)
        .filter(api_keys::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| KeyError::NotFound(name.to_owned()))
}

/// The tenant of key `id` (revoked keys too): the default tenant for a key
/// without one, or one that is gone.
pub async fn tenant_of_key(db: &impl ConnectionTrait, id: i32) -> Result<String, DbErr> {
    let found = api_keys::Entity::find_by_id(id).one(db).await?;
    Ok(found
        .and_then(|k| k.tenant_id)
        .unwrap_or_else(|| DEFAULT_TENANT.to_owned()))
}

/// The role of the key named `name` in `tenant`.
pub async fn role_of(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
) -> Result<Option<Role>, KeyError> {
    Ok(named(db, tenant, name).await?.role.parse().ok())
}

/// Revokes a key by tenant and name, and retires its member when nothing else keeps
/// it ([`super::members::retire_if_unkept`]). Revoking a revoked key is not an error.
pub async fn revoke(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
    now: DateTime<Utc>,
) -> Result<(), KeyError> {
    // With the key creations of the tenant (`create_by`), so a member is never
    // retired while a key for it is being made.
    crate::db::bounds::serialize(db, "api_keys", tenant).await?;
    let row = named(db, tenant, name).await?;
    if row.revoked_at.is_none() {
        let member = row.member_id;
        let mut active: api_keys::ActiveModel = row.into();
        active.revoked_at = Set(Some(now));
        active.updated_at = Set(now);
        active.update(db).await?;
        if let Some(member) = member {
            super::members::retire_if_unkept(db, member, now).await?;
        }
    }
    Ok(())
}

/// Revokes a key and moves the configuration generation in one transaction, so
/// every process's cached copy of the key stops working at once; the generation.
pub async fn revoke_now(
    db: &sea_orm::DatabaseConnection,
    tenant: &str,
    name: &str,
    now: DateTime<Utc>,
) -> Result<i64, KeyError> {
    let txn = crate::db::begin_write(db).await?;
    revoke(&txn, tenant, name, now).await?;
    let generation = crate::db::generation::bump(&txn).await?;
    txn.commit().await?;
    Ok(generation)
}

/// Keys ever created, revoked and deleted ones included.
pub async fn count_ever(db: &impl ConnectionTrait) -> Result<u64, DbErr> {
    api_keys::Entity::find().count(db).await
}

/// Keys that can still be used.
pub async fn count_usable(db: &impl ConnectionTrait) -> Result<u64, DbErr> {
    live().count(db).await
}

/// The principal behind a presented key, or `None` for a malformed, unknown or revoked key.
pub async fn authenticate(
    db: &impl ConnectionTrait,
    presented: &str,
) -> Result<Option<Principal>, DbErr> {
    Ok(authenticate_row(db, presented).await?.map(|(_, who)| who))
}

/// [`authenticate`], with the key's row id (what a console session refers to).
pub async fn authenticate_row(
    db: &impl ConnectionTrait,
    presented: &str,
) -> Result<Option<(i32, Principal)>, DbErr> {
    let Some(prefix) = prefix_of(presented) else {
        return Ok(None);
    };
    let Some(row) = live()
        .filter(api_keys::Column::Prefix.eq(prefix))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    if !constant_time_eq(hash(presented).as_bytes(), row.key_hash.as_bytes()) {
        return Ok(None);
    }
    Ok(principal_of(db, row).await?.map(|who| (who.key_id, who)))
}

/// The principal of key row `id` while it is neither revoked nor deleted.
pub async fn principal_by_id(
    db: &impl ConnectionTrait,
    id: i32,
) -> Result<Option<Principal>, DbErr> {
    let Some(row) = live().filter(api_keys::Column::Id.eq(id)).one(db).await? else {
        return Ok(None);
    };
    principal_of(db, row).await
}

fn live() -> sea_orm::Select<api_keys::Entity> {
    api_keys::Entity::find()
        .filter(api_keys::Column::RevokedAt.is_null())
        .filter(api_keys::Column::DeletedAt.is_null())
}

/// The principal of a live key row: `None` for an unknown role or a key whose
/// member is gone (a key without a member authenticates no one).
async fn principal_of(
    db: &impl ConnectionTrait,
    row: api_keys::Model,
) -> Result<Option<Principal>, DbErr> {
    let Ok(role) = row.role.parse::<Role>() else {
        return Ok(None);
    };
    let Some(member_id) = row.member_id else {
        return Ok(None);
    };
    let Some(member) = super::members::live_by_id(db, member_id).await? else {
        return Ok(None);
    };
    Ok(Some(Principal {
        key_id: row.id,
        key_name: row.name,
        member_id,
        member: member.name,
        signer: member.signer,
        role,
        tenant_id: row.tenant_id,
        agent: row.agent,
    }))
}

/// 32 random bytes as 64 lowercase hex digits (console session and CSRF tokens).
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random)?;
    Ok(hex(&random))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["admin", "bootstrap-admin", "ci.agent_2", "0x"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "Admin", "-x", "has space", "é", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn only_well_formed_keys_have_a_prefix() {
        let key = format!("lo_{}_{}", "a1".repeat(6), "0f".repeat(32));
        assert_eq!(prefix_of(&key), Some("a1a1a1a1a1a1"));
        assert_eq!(prefix_of("lo_short_x"), None);
        assert_eq!(prefix_of(&key.replace("lo_", "xx_")), None);
        assert_eq!(prefix_of(&format!("{key}0")), None);
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn constant_time_eq_compares_whole_slices() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
