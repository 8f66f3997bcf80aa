//! Channels become data, and the prompt's optional sections get a home.
//!
//! 1. create `channels`: each channel's guidance text and which optional sections it gets;
//! 2. insert the five default channels (web, telegram, scheduled, heartbeat, session_open);
//! 3. add `agent_configurations.operating_model` and `.interaction_learning` (text, NULL = none);
//! 4. add `agent_configurations.soul_version` and `.template_version`, counters that a
//!    rendered prompt reports as its provenance;
//! 5. fill the assistant's operating model and interaction learning where they are NULL.
//!
//! The data comes from `frozen.json` beside this file, never from `seeds/`. Inserts and
//! updates touch only rows that are missing or NULL, so a second run changes nothing.
//! `down` drops what `up` created: the table did not exist before, and the columns held
//! nothing the earlier schema knew about.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;
use serde::Deserialize;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260301_000003_channels_and_prompt_sections"
    }
}

/// The data this migration applies, as it was when the migration was written.
#[derive(Debug, Deserialize)]
pub struct Frozen {
    pub channels: Vec<FrozenChannel>,
    pub assistant: FrozenAssistant,
}

#[derive(Debug, Deserialize)]
pub struct FrozenChannel {
    pub name: String,
    pub description: String,
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

#[derive(Debug, Deserialize)]
pub struct FrozenAssistant {
    pub name: String,
    pub operating_model: String,
    pub interaction_learning: String,
}

/// Parses the frozen data; it is compiled in, so a failure is a build defect, reported rather than panicked on.
pub fn frozen() -> Result<Frozen, DbErr> {
    serde_json::from_str(include_str!(
        "m20260301_000003_channels_and_prompt_sections/frozen.json"
    ))
    .map_err(|e| {
        DbErr::Custom(format!(
            "channels_and_prompt_sections: frozen data is invalid: {e}"
        ))
    })
}

#[derive(DeriveIden)]
enum Channels {
    Table,
    Id,
    Name,
    Description,
    Guidance,
    IncludeOperatingModel,
    IncludeInteractionLearning,
    IncludeSessionSection,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(Clone, Copy, DeriveIden)]
enum AgentConfigurations {
    Table,
    Name,
    OperatingModel,
    InteractionLearning,
    SoulVersion,
    TemplateVersion,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let frozen = frozen()?;
        let flag = |col: Channels| {
            ColumnDef::new(col)
                .boolean()
                .not_null()
                .default(false)
                .take()
        };
        let stamp = |col: Channels| ColumnDef::new(col).timestamp_with_time_zone().take();
        manager
            .create_table(
                Table::create()
                    .table(Channels::Table)
                    .if_not_exists()
                    .col(
                        ColumnDef::new(Channels::Id)
                            .integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(Channels::Name)
                            .string()
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(Channels::Description).text().not_null())
                    .col(ColumnDef::new(Channels::Guidance).text().not_null())
                    .col(flag(Channels::IncludeOperatingModel))
                    .col(flag(Channels::IncludeInteractionLearning))
                    .col(flag(Channels::IncludeSessionSection))
                    .col(stamp(Channels::CreatedAt).not_null())
                    .col(stamp(Channels::UpdatedAt).not_null())
                    .col(stamp(Channels::DeletedAt).null())
                    .to_owned(),
            )
            .await?;

        // SQLite takes one ALTER option per statement.
        for col in [
            ColumnDef::new(AgentConfigurations::OperatingModel)
                .text()
                .null()
                .take(),
            ColumnDef::new(AgentConfigurations::InteractionLearning)
                .text()
                .null()
                .take(),
            ColumnDef::new(AgentConfigurations::SoulVersion)
                .integer()
                .not_null()
                .default(1)
                .take(),
            ColumnDef::new(AgentConfigurations::TemplateVersion)
                .integer()
                .not_null()
                .default(1)
                .take(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(AgentConfigurations::Table)
                        .add_column(col)
                        .to_owned(),
                )
                .await?;
        }

        apply_data_steps(manager.get_connection(), &frozen, chrono::Utc::now()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // sea-query refuses DROP COLUMN for SQLite, which has supported it since 3.35.
        for col in [
            "template_version",
            "soul_version",
            "interaction_learning",
            "operating_model",
        ] {
            db.execute_unprepared(&format!(
                "ALTER TABLE agent_configurations DROP COLUMN {col}"
            ))
            .await?;
        }
        manager
            .drop_table(Table::drop().table(Channels::Table).to_owned())
            .await
    }
}

/// Steps 2 and 5. Public so tests can prove a second run changes nothing.
pub async fn apply_data_steps<C: ConnectionTrait>(
    db: &C,
    frozen: &Frozen,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), DbErr> {
    for channel in &frozen.channels {
        let exists = db
            .query_one(
                Query::select()
                    .column(Channels::Id)
                    .from(Channels::Table)
                    .and_where(Expr::col(Channels::Name).eq(channel.name.as_str())),
            )
            .await?
            .is_some();
        if exists {
            continue;
        }
        db.execute(
            Query::insert()
                .into_table(Channels::Table)
                .columns([
                    Channels::Name,
                    Channels::Description,
                    Channels::Guidance,
                    Channels::IncludeOperatingModel,
                    Channels::IncludeInteractionLearning,
                    Channels::IncludeSessionSection,
                    Channels::CreatedAt,
                    Channels::UpdatedAt,
                ])
                .values([
                    channel.name.as_str().into(),
                    channel.description.as_str().into(),
                    channel.guidance.as_str().into(),
                    channel.include_operating_model.into(),
                    channel.include_interaction_learning.into(),
                    channel.include_session_section.into(),
                    now.into(),
                    now.into(),
                ])
                .map_err(|e| DbErr::Custom(e.to_string()))?,
        )
        .await?;
    }

    let assistant = Expr::col(AgentConfigurations::Name).eq(frozen.assistant.name.as_str());
    for (col, text) in [
        (
            AgentConfigurations::OperatingModel,
            &frozen.assistant.operating_model,
        ),
        (
            AgentConfigurations::InteractionLearning,
            &frozen.assistant.interaction_learning,
        ),
    ] {
        db.execute(
            Query::update()
                .table(AgentConfigurations::Table)
                .value(col, text.as_str())
                .value(AgentConfigurations::UpdatedAt, now)
                .and_where(assistant.clone())
                .and_where(Expr::col(col).is_null()),
        )
        .await?;
    }
    Ok(())
}
