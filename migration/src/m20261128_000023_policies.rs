//! Policies as data (issue 38).
//!
//! - `agent_configurations.policy`: the agent's Cedar policy set (`NULL`: none,
//!   and the tiers decide as before); `policy_tests`: its test cases (JSON), run by
//!   `loadout check`. The policy is part of every revision published from now on.
//! - `proposals.decided_by`: which revision and policy decided the call (JSON
//!   `{"revision", "policy"}`; `NULL`: the tier decided, or a proposal from before).
//! - `user_groups` and `user_group_members`: groups of users per tenant, usable in
//!   policies (`principal in Group::"ops"`). Soft-deleted; a name is unique among a
//!   tenant's live groups, a user among a group's live members.
//!
//! `down` drops what `up` added.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261128_000023_policies"
    }
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Policy,
    PolicyTests,
}

#[derive(DeriveIden)]
enum Proposals {
    Table,
    DecidedBy,
}

#[derive(DeriveIden)]
enum UserGroups {
    Table,
    Id,
    TenantId,
    Name,
    CreatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum UserGroupMembers {
    Table,
    Id,
    GroupId,
    UserId,
    CreatedAt,
    DeletedAt,
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

fn add_text<T: IntoIden, C: IntoIden>(table: T, column: C) -> TableAlterStatement {
    Table::alter()
        .table(table)
        .add_column(ColumnDef::new(column).text().null())
        .to_owned()
}

fn drop_column<T: IntoIden, C: IntoIden>(table: T, column: C) -> TableAlterStatement {
    Table::alter().table(table).drop_column(column).to_owned()
}

const GROUP_NAMES: &str = "CREATE UNIQUE INDEX user_groups_live_name \
     ON user_groups (tenant_id, name) WHERE deleted_at IS NULL";
const GROUP_MEMBERS: &str = "CREATE UNIQUE INDEX user_group_members_live \
     ON user_group_members (group_id, user_id) WHERE deleted_at IS NULL";
const GROUPS_OF: &str = "CREATE INDEX user_group_members_user ON user_group_members (user_id)";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            AgentConfigurations::Policy,
            AgentConfigurations::PolicyTests,
        ] {
            manager
                .alter_table(add_text(AgentConfigurations::Table, column))
                .await?;
        }
        manager
            .alter_table(add_text(Proposals::Table, Proposals::DecidedBy))
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(UserGroups::Table)
                    .col(id(UserGroups::Id))
                    .col(ColumnDef::new(UserGroups::TenantId).string().not_null())
                    .col(ColumnDef::new(UserGroups::Name).string().not_null())
                    .col(stamp(UserGroups::CreatedAt, false))
                    .col(stamp(UserGroups::DeletedAt, true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(UserGroupMembers::Table)
                    .col(id(UserGroupMembers::Id))
                    .col(
                        ColumnDef::new(UserGroupMembers::GroupId)
                            .integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(UserGroupMembers::UserId).string().not_null())
                    .col(stamp(UserGroupMembers::CreatedAt, false))
                    .col(stamp(UserGroupMembers::DeletedAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(UserGroupMembers::Table, UserGroupMembers::GroupId)
                            .to(UserGroups::Table, UserGroups::Id),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for statement in [GROUP_NAMES, GROUP_MEMBERS, GROUPS_OF] {
            db.execute_unprepared(statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(UserGroupMembers::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(UserGroups::Table).to_owned())
            .await?;
        manager
            .alter_table(drop_column(Proposals::Table, Proposals::DecidedBy))
            .await?;
        for column in [
            AgentConfigurations::Policy,
            AgentConfigurations::PolicyTests,
        ] {
            manager
                .alter_table(drop_column(AgentConfigurations::Table, column))
                .await?;
        }
        Ok(())
    }
}
