//! Members: every key belongs to a person or a service (issue 34, items 1, 2, 4, 9).
//!
//! - `members`: a named person or service account, in a tenant (`NULL`: the
//!   default tenant, and every operator's member), unique by name in its tenant.
//!   `signer` is the power to sign off change requests, granted on the database
//!   or by a request another signer approves; `oidc_issuer` and `oidc_subject`
//!   bind a person to a single sign-on identity (unique together).
//! - `api_keys.member_id`: whose key it is. Every existing key gets a member of
//!   its own, named as the key (nothing is merged silently; `loadout members
//!   merge` joins them). An agent key's member is a service; the rest are people.
//!   Existing operator keys and approver keys of the default tenant were exactly
//!   the keys that could sign off, so their members are signers: an upgrade takes
//!   no power away and gives none.
//! - `signer_grants`: every grant and revocation of sign-off power, requested and
//!   decided (by whom, when, why): the history of who may sign off.
//! - `change_requests.requested_member_id` and `decided_member_id`: the members
//!   behind a request and its decision (filled from the keys for existing ones).
//! - `oidc_logins`: console single sign-ons in flight (state hash, nonce, PKCE
//!   verifier), each used once.
//! - `rollouts.signed_share_bp`: the share a sign-off allowed; raising a gated
//!   rollout above it is a new change request.
//!
//! No foreign keys on the added columns: SQLite cannot add one to an existing
//! table. `down` drops what `up` added.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261127_000021_members"
    }
}

#[derive(DeriveIden)]
enum Members {
    Table,
    Id,
    Name,
    Kind,
    TenantId,
    Signer,
    OidcIssuer,
    OidcSubject,
    CreatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum SignerGrants {
    Table,
    Id,
    MemberId,
    Grant,
    State,
    Reason,
    RequestedBy,
    RequestedMemberId,
    CreatedAt,
    ExpiresAt,
    DecidedBy,
    DecidedMemberId,
    DecidedAt,
}

#[derive(DeriveIden)]
enum OidcLogins {
    Table,
    Id,
    StateHash,
    Nonce,
    PkceVerifier,
    CreatedAt,
    UsedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    MemberId,
}

#[derive(DeriveIden)]
enum ChangeRequests {
    Table,
    RequestedMemberId,
    DecidedMemberId,
}

#[derive(DeriveIden)]
enum Rollouts {
    Table,
    SignedShareBp,
}

fn id<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .to_owned()
}

fn stamp<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.timestamp_with_time_zone();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn add_int<T: IntoIden, C: IntoIden>(table: T, column: C) -> TableAlterStatement {
    Table::alter()
        .table(table)
        .add_column(ColumnDef::new(column).integer().null())
        .to_owned()
}

fn drop_column<T: IntoIden, C: IntoIden>(table: T, column: C) -> TableAlterStatement {
    Table::alter().table(table).drop_column(column).to_owned()
}

const MEMBER_NAMES: &str = "CREATE UNIQUE INDEX members_tenant_name \
     ON members ((COALESCE(tenant_id, 'default')), name)";
const MEMBER_SUBJECTS: &str =
    "CREATE UNIQUE INDEX members_oidc_subject ON members (oidc_issuer, oidc_subject)";
const KEY_MEMBERS: &str = "CREATE INDEX api_keys_member ON api_keys (member_id)";
const GRANTS_OF: &str = "CREATE INDEX signer_grants_member ON signer_grants (member_id)";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Members::Table)
                    .col(id(Members::Id))
                    .col(ColumnDef::new(Members::Name).string().not_null())
                    .col(ColumnDef::new(Members::Kind).string().not_null())
                    .col(ColumnDef::new(Members::TenantId).string().null())
                    .col(
                        ColumnDef::new(Members::Signer)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(Members::OidcIssuer).string().null())
                    .col(ColumnDef::new(Members::OidcSubject).string().null())
                    .col(stamp(Members::CreatedAt, false))
                    .col(stamp(Members::DeletedAt, true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SignerGrants::Table)
                    .col(id(SignerGrants::Id))
                    .col(ColumnDef::new(SignerGrants::MemberId).integer().not_null())
                    .col(ColumnDef::new(SignerGrants::Grant).boolean().not_null())
                    .col(ColumnDef::new(SignerGrants::State).string().not_null())
                    .col(ColumnDef::new(SignerGrants::Reason).text().null())
                    .col(
                        ColumnDef::new(SignerGrants::RequestedBy)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(SignerGrants::RequestedMemberId)
                            .integer()
                            .null(),
                    )
                    .col(stamp(SignerGrants::CreatedAt, false))
                    .col(stamp(SignerGrants::ExpiresAt, false))
                    .col(ColumnDef::new(SignerGrants::DecidedBy).string().null())
                    .col(
                        ColumnDef::new(SignerGrants::DecidedMemberId)
                            .integer()
                            .null(),
                    )
                    .col(stamp(SignerGrants::DecidedAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(SignerGrants::Table, SignerGrants::MemberId)
                            .to(Members::Table, Members::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(OidcLogins::Table)
                    .col(id(OidcLogins::Id))
                    .col(
                        ColumnDef::new(OidcLogins::StateHash)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(OidcLogins::Nonce).string().not_null())
                    .col(ColumnDef::new(OidcLogins::PkceVerifier).string().not_null())
                    .col(stamp(OidcLogins::CreatedAt, false))
                    .col(stamp(OidcLogins::UsedAt, true))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(add_int(ApiKeys::Table, ApiKeys::MemberId))
            .await?;
        for column in [
            ChangeRequests::RequestedMemberId,
            ChangeRequests::DecidedMemberId,
        ] {
            manager
                .alter_table(add_int(ChangeRequests::Table, column))
                .await?;
        }
        manager
            .alter_table(add_int(Rollouts::Table, Rollouts::SignedShareBp))
            .await?;
        let db = manager.get_connection();
        for statement in [MEMBER_NAMES, MEMBER_SUBJECTS, KEY_MEMBERS, GRANTS_OF] {
            db.execute_unprepared(statement).await?;
        }
        members_for_keys(db).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("DROP INDEX api_keys_member").await?;
        manager
            .alter_table(drop_column(ApiKeys::Table, ApiKeys::MemberId))
            .await?;
        for column in [
            ChangeRequests::RequestedMemberId,
            ChangeRequests::DecidedMemberId,
        ] {
            manager
                .alter_table(drop_column(ChangeRequests::Table, column))
                .await?;
        }
        manager
            .alter_table(drop_column(Rollouts::Table, Rollouts::SignedShareBp))
            .await?;
        manager
            .drop_table(Table::drop().table(OidcLogins::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(SignerGrants::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Members::Table).to_owned())
            .await
    }
}

/// One member per existing key (see the module), then each change request's
/// members from its keys.
async fn members_for_keys(db: &SchemaManagerConnection<'_>) -> Result<(), DbErr> {
    let keys = db
        .query_all(
            Query::select()
                .columns([
                    Alias::new("id"),
                    Alias::new("name"),
                    Alias::new("role"),
                    Alias::new("tenant_id"),
                ])
                .from(ApiKeys::Table)
                .order_by(Alias::new("id"), Order::Asc),
        )
        .await?;
    let now = chrono::Utc::now();
    for key in keys {
        let id: i32 = key.try_get("", "id")?;
        let name: String = key.try_get("", "name")?;
        let role: String = key.try_get("", "role")?;
        let tenant: Option<String> = key.try_get("", "tenant_id")?;
        let kind = if role == "agent" { "service" } else { "person" };
        let signer = role == "operator" || (role == "approver" && tenant.is_none());
        let insert = Query::insert()
            .into_table(Members::Table)
            .columns([
                Members::Name,
                Members::Kind,
                Members::TenantId,
                Members::Signer,
                Members::CreatedAt,
            ])
            .values_panic([
                name.as_str().into(),
                kind.into(),
                tenant.into(),
                signer.into(),
                now.into(),
            ])
            .returning_col(Members::Id)
            .to_owned();
        let row = db
            .query_one(&insert)
            .await?
            .ok_or_else(|| DbErr::Custom("a member without its id".into()))?;
        let member: i32 = row.try_get("", "id")?;
        let update = Query::update()
            .table(ApiKeys::Table)
            .value(ApiKeys::MemberId, member)
            .and_where(Expr::col(Alias::new("id")).eq(id))
            .to_owned();
        db.execute(&update).await?;
        if signer {
            let grant = Query::insert()
                .into_table(SignerGrants::Table)
                .columns([
                    SignerGrants::MemberId,
                    SignerGrants::Grant,
                    SignerGrants::State,
                    SignerGrants::Reason,
                    SignerGrants::RequestedBy,
                    SignerGrants::CreatedAt,
                    SignerGrants::ExpiresAt,
                    SignerGrants::DecidedBy,
                    SignerGrants::DecidedAt,
                ])
                .values_panic([
                    member.into(),
                    true.into(),
                    "approved".into(),
                    format!("migration 21: key {name:?} ({role}) could sign off before members")
                        .into(),
                    "database".into(),
                    now.into(),
                    now.into(),
                    "database".into(),
                    now.into(),
                ])
                .to_owned();
            db.execute(&grant).await?;
        }
    }
    for (member, key) in [
        ("requested_member_id", "requested_key_id"),
        ("decided_member_id", "decided_key_id"),
    ] {
        db.execute_unprepared(&format!(
            "UPDATE change_requests SET {member} = \
             (SELECT member_id FROM api_keys WHERE api_keys.id = change_requests.{key})"
        ))
        .await?;
    }
    Ok(())
}
