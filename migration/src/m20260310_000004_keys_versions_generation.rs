//! What the HTTP API needs.
//!
//! 1. `api_keys`: keys stored only as SHA-256 hashes, found by a public prefix, each
//!    with a role (`admin` or `agent`) and a nullable `tenant_id` for later;
//! 2. `prompt_versions`: one immutable row per accepted change to an agent's soul or
//!    template (what, who, when, whether lint errors were overridden);
//! 3. `loadout_state`: one row holding `generation`, bumped by every admin write in the
//!    same transaction, so every process can tell that its cache is stale;
//! 4. a version-1 row for every existing agent's soul and template, so the history
//!    starts complete.
//!
//! `down` drops the three tables: none existed before `up`.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260310_000004_keys_versions_generation"
    }
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    Name,
    Role,
    Prefix,
    KeyHash,
    TenantId,
    RevokedAt,
}

#[derive(DeriveIden)]
enum PromptVersions {
    Table,
    Id,
    AgentId,
    Kind,
    Version,
    Body,
    Forced,
    Author,
}

#[derive(DeriveIden)]
enum LoadoutState {
    Table,
    Id,
    Generation,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
}

#[derive(DeriveIden)]
#[allow(clippy::enum_variant_names)]
enum Stamp {
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

fn id<T: IntoIden>(col: T) -> ColumnDef {
    ColumnDef::new(col)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .take()
}

fn stamp(col: Stamp) -> ColumnDef {
    ColumnDef::new(col).timestamp_with_time_zone().take()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .col(id(ApiKeys::Id))
                    .col(
                        ColumnDef::new(ApiKeys::Name)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(ApiKeys::Role).string().not_null())
                    .col(
                        ColumnDef::new(ApiKeys::Prefix)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(ApiKeys::KeyHash).string().not_null())
                    .col(ColumnDef::new(ApiKeys::TenantId).string().null())
                    .col(stamp(Stamp::CreatedAt).not_null())
                    .col(stamp(Stamp::UpdatedAt).not_null())
                    .col(
                        ColumnDef::new(ApiKeys::RevokedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(stamp(Stamp::DeletedAt).null())
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(PromptVersions::Table)
                    .col(id(PromptVersions::Id))
                    .col(ColumnDef::new(PromptVersions::AgentId).integer().not_null())
                    // `soul` or `template`.
                    .col(ColumnDef::new(PromptVersions::Kind).string().not_null())
                    .col(ColumnDef::new(PromptVersions::Version).integer().not_null())
                    // NULL for a template version that went back to the built-in assembly.
                    .col(ColumnDef::new(PromptVersions::Body).text().null())
                    .col(
                        ColumnDef::new(PromptVersions::Forced)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(PromptVersions::Author).string().not_null())
                    .col(stamp(Stamp::CreatedAt).not_null())
                    .foreign_key(
                        ForeignKey::create()
                            .from(PromptVersions::Table, PromptVersions::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .index(
                        Index::create()
                            .name("prompt_versions_agent_kind_version_key")
                            .col(PromptVersions::AgentId)
                            .col(PromptVersions::Kind)
                            .col(PromptVersions::Version)
                            .unique(),
                    )
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(LoadoutState::Table)
                    .col(
                        ColumnDef::new(LoadoutState::Id)
                            .integer()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(LoadoutState::Generation)
                            .big_integer()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;

        let db = manager.get_connection();
        db.execute_unprepared("INSERT INTO loadout_state (id, generation) VALUES (1, 1)")
            .await?;
        // History starts at the current soul and template of every agent.
        for (kind, body, version) in [
            ("soul", "soul", "soul_version"),
            ("template", "prompt_template", "template_version"),
        ] {
            db.execute_unprepared(&format!(
                "INSERT INTO prompt_versions (agent_id, kind, version, body, forced, author, created_at) \
                 SELECT id, '{kind}', {version}, {body}, false, 'migration', updated_at FROM agent_configurations"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in ["loadout_state", "prompt_versions", "api_keys"] {
            manager
                .drop_table(Table::drop().table(Alias::new(table)).to_owned())
                .await?;
        }
        Ok(())
    }
}
