//! Creating, reading, updating and soft-deleting agent configurations.

use chrono::{DateTime, Utc};
use entity::agent_configurations;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::template::{self, Kind};
use super::{MAX_TEXT_BYTES, check_identity, row};
use crate::db::Writer;
use crate::db::idempotency::Pending;
use crate::db::page;
use crate::error::{Error, Result, check_name, check_size};
use crate::fetch::Prompts;
use crate::prompt::lint;
use crate::registry::guard;
use crate::releases::ReleaseMode;

/// An agent as an admin sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    pub name: String,
    /// `{display_name, role, description}`.
    #[schema(value_type = Object)]
    pub identity: Value,
    pub soul: String,
    pub soul_version: i32,
    /// `null`: the built-in assembly renders the prompt.
    pub prompt_template: Option<String>,
    pub template_version: i32,
    pub operating_model: Option<String>,
    pub interaction_learning: Option<String>,
    /// How saves reach `production`: `direct` (at once) or `gated` (by promotion).
    pub release_mode: ReleaseMode,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<agent_configurations::Model> for AgentView {
    fn from(row: agent_configurations::Model) -> Self {
        Self {
            name: row.name,
            identity: row.identity,
            soul: row.soul,
            soul_version: row.soul_version,
            prompt_template: row.prompt_template,
            template_version: row.template_version,
            operating_model: row.operating_model,
            interaction_learning: row.interaction_learning,
            release_mode: ReleaseMode::or_gated(&row.release_mode),
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// A page of live agents by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<AgentView>,
    /// Pass as `after` for the next page; `null`: this page is the last.
    pub next_after: Option<String>,
}

/// A new agent, with the template's lint warnings.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedAgent {
    #[serde(flatten)]
    pub agent: AgentView,
    pub warnings: Vec<lint::Problem>,
}

/// The body of `POST /v1/agents`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAgent {
    pub name: String,
    #[schema(value_type = Object)]
    pub identity: Value,
    pub soul: String,
    pub prompt_template: Option<String>,
    pub operating_model: Option<String>,
    pub interaction_learning: Option<String>,
}

/// The fields an admin may change; anything else (ids, versions, timestamps) is refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentUpdate {
    #[schema(value_type = Option<Object>)]
    pub identity: Option<Value>,
    pub soul: Option<String>,
    /// `null` removes the section.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    pub operating_model: Option<Option<String>>,
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    pub interaction_learning: Option<Option<String>>,
    /// Refuse the write (409) unless the soul is still at this version.
    pub expected_soul_version: Option<i32>,
    /// `direct`: every save moves `production` too (after a switch to it, from the
    /// next save on). `gated`: a save moves `latest` only, and protected labels move
    /// by signed-off change requests. A gated agent stays gated over the API (422
    /// `release_mode_gated`); `loadout release-mode AGENT direct` on the database
    /// takes the gate away.
    pub release_mode: Option<ReleaseMode>,
}

pub async fn list(db: &DatabaseConnection, page: &page::ByName) -> Result<AgentList> {
    let limit = crate::error::check_limit(page.limit)?;
    let mut find = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .order_by_asc(agent_configurations::Column::Name)
        .limit(limit + 1);
    if let Some(after) = &page.after {
        find = find.filter(agent_configurations::Column::Name.gt(after.as_str()));
    }
    let (rows, next_after) = page::cut(find.all(db).await?, limit, |a| a.name.clone());
    Ok(AgentList {
        agents: rows.into_iter().map(AgentView::from).collect(),
        next_after,
    })
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<AgentView> {
    Ok(row(db, name).await?.into())
}

fn check_new(new: &NewAgent) -> Result<()> {
    check_name("agent", &new.name)?;
    check_identity(&new.identity)?;
    check_size("soul", &new.soul, MAX_TEXT_BYTES)?;
    for text in [&new.operating_model, &new.interaction_learning]
        .into_iter()
        .flatten()
    {
        check_size("section", text, MAX_TEXT_BYTES)?;
    }
    Ok(())
}

/// Creates an agent at soul and template version 1 inside an open write (its
/// template linted before, as [`create`] does); `mode`: the release mode, the
/// column's default when `None`.
pub async fn create_in(
    write: &mut guard::Write,
    author: &str,
    new: NewAgent,
    mode: Option<ReleaseMode>,
) -> Result<agent_configurations::Model> {
    check_new(&new)?;
    let now = write.now();
    let name = new.name.clone();
    let mut active = agent_configurations::ActiveModel {
        name: Set(new.name),
        identity: Set(new.identity),
        soul: Set(new.soul.clone()),
        prompt_template: Set(new.prompt_template.clone()),
        operating_model: Set(new.operating_model),
        interaction_learning: Set(new.interaction_learning),
        soul_version: Set(1),
        template_version: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    };
    if let Some(mode) = mode {
        active.release_mode = Set(mode.as_str().to_owned());
    }
    let saved = active.insert(&**write).await.map_err(|e| {
        Error::from_db(e, || {
            format!(
                "an agent named {name:?} exists (or existed: names of deleted agents stay taken)"
            )
        })
    })?;
    write.created(saved.id);
    let first = template::NewVersion {
        agent_id: saved.id,
        version: 1,
        forced: false,
        reason: None,
        author,
    };
    template::record(write, Kind::Soul, &first, Some(new.soul)).await?;
    template::record(write, Kind::Template, &first, new.prompt_template).await?;
    Ok(saved)
}

/// Creates an agent at soul and template version 1. A template with lint errors
/// is refused (422): create without one and save it with `force` instead.
pub async fn create(
    prompts: &Prompts<'_>,
    max_template_bytes: usize,
    author: &str,
    new: NewAgent,
    key: Option<&Pending>,
) -> Result<CreatedAgent> {
    check_new(&new)?;
    let warnings = match &new.prompt_template {
        Some(text) => template::lint_new(prompts.db, max_template_bytes, text).await?,
        None => Vec::new(),
    };
    if let Some(text) = &new.prompt_template {
        let agent = crate::prompt::builder::Agent {
            name: new.name.clone(),
            identity: new.identity.clone(),
            soul: new.soul.clone(),
            soul_version: 1,
            prompt_template: None,
            template_version: 1,
            operating_model: new.operating_model.clone().unwrap_or_default(),
            interaction_learning: new.interaction_learning.clone().unwrap_or_default(),
            tools: Vec::new(),
        };
        crate::fetch::check_worst_case(prompts, text, &agent).await?;
    }
    let mut write = guard::begin_for_agents(prompts.db, prompts.clock.now())
        .await?
        .keyed(key)
        .await?
        .by(author);
    let saved = create_in(&mut write, author, new, None).await?;
    guard::commit(write, prompts.generation).await?;
    Ok(CreatedAgent {
        agent: saved.into(),
        warnings,
    })
}

/// Sets an agent's release mode, either way: the command line's
/// `loadout release-mode`, which needs the database itself (over the API a gated
/// agent stays gated; see [`update`]). Through the write guard, so every process
/// sees it.
pub async fn set_release_mode(
    w: &Writer<'_>,
    author: &str,
    name: &str,
    mode: ReleaseMode,
) -> Result<AgentView> {
    let mut write = w.begin_for_agents().await?.by(author);
    let found = row(&*write, name).await?;
    write.touch(found.id).await?;
    let mut active: agent_configurations::ActiveModel = found.into();
    active.release_mode = Set(mode.as_str().to_owned());
    active.updated_at = Set(write.now());
    let saved = active.update(&*write).await?;
    w.commit(write).await?;
    Ok(saved.into())
}

/// Soft delete: `deleted_at` is set and the agent disappears from every endpoint.
pub async fn delete(w: &Writer<'_>, name: &str) -> Result<AgentView> {
    let mut write = w.begin_for_agents().await?;
    let saved = delete_in(&mut write, name).await?;
    w.commit(write).await?;
    Ok(saved.into())
}

/// Soft-deletes a live agent inside an open write.
pub async fn delete_in(
    write: &mut guard::Write,
    name: &str,
) -> Result<agent_configurations::Model> {
    let found = row(&**write, name).await?;
    write.touch(found.id).await?;
    let now = write.now();
    let deleted = crate::events::AgentDeleted {
        agent: found.name.clone(),
    };
    crate::events::record(&**write, now, crate::events::Event::AgentDeleted(deleted)).await?;
    let mut active: agent_configurations::ActiveModel = found.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(&**write).await?)
}

fn check_update(update: &AgentUpdate) -> Result<()> {
    if let Some(identity) = &update.identity {
        check_identity(identity)?;
    }
    for (what, text) in [
        ("soul", update.soul.as_ref()),
        (
            "operating_model",
            update.operating_model.as_ref().and_then(Option::as_ref),
        ),
        (
            "interaction_learning",
            update
                .interaction_learning
                .as_ref()
                .and_then(Option::as_ref),
        ),
    ] {
        if let Some(text) = text {
            check_size(what, text, MAX_TEXT_BYTES)?;
        }
    }
    Ok(())
}

/// A larger soul, identity or section must not make the saved template's worst
/// case pass the rendered-prompt limit (422, as a template save would be).
async fn check_update_expansion(
    prompts: &Prompts<'_>,
    name: &str,
    update: &AgentUpdate,
) -> Result<()> {
    let loaded = crate::fetch::agent(prompts, name).await?;
    let Some(text) = loaded.agent.prompt_template.as_deref() else {
        return Ok(());
    };
    let mut agent = loaded.agent.clone();
    if let Some(soul) = &update.soul {
        agent.soul.clone_from(soul);
    }
    if let Some(identity) = &update.identity {
        agent.identity = identity.clone();
    }
    if let Some(text) = &update.operating_model {
        agent.operating_model = text.clone().unwrap_or_default();
    }
    if let Some(text) = &update.interaction_learning {
        agent.interaction_learning = text.clone().unwrap_or_default();
    }
    crate::fetch::check_worst_case(prompts, text, &agent).await
}

/// Updates identity, soul or sections; a changed soul is a new soul version.
pub async fn update(
    prompts: &Prompts<'_>,
    author: &str,
    name: &str,
    update: AgentUpdate,
    key: Option<&Pending>,
) -> Result<AgentView> {
    check_update(&update)?;
    check_update_expansion(prompts, name, &update).await?;
    let mut write = guard::begin_for_agents(prompts.db, prompts.clock.now())
        .await?
        .keyed(key)
        .await?
        .by(author);
    let saved = update_in(&mut write, author, name, update).await?;
    guard::commit(write, prompts.generation).await?;
    Ok(saved.into())
}

/// Applies an [`AgentUpdate`] inside an open write: a changed soul is a new soul
/// version; a gated agent stays gated.
pub async fn update_in(
    write: &mut guard::Write,
    author: &str,
    name: &str,
    update: AgentUpdate,
) -> Result<agent_configurations::Model> {
    check_update(&update)?;
    let found = row(&**write, name).await?;
    write.touch(found.id).await?;
    if update.release_mode == Some(ReleaseMode::Direct)
        && ReleaseMode::or_gated(&found.release_mode) == ReleaseMode::Gated
    {
        // Otherwise one operator could switch to direct, save, and switch back:
        // production moved without anyone's sign-off.
        return Err(Error::refused(
            "release_mode_gated",
            format!(
                "{name} is gated: only `loadout release-mode {name} direct` on the database takes the sign-off away"
            ),
        ));
    }
    if let Some(expected) = update.expected_soul_version
        && expected != found.soul_version
    {
        return Err(template::stale(Kind::Soul, expected, found.soul_version));
    }
    let soul_changed = update.soul.as_ref().is_some_and(|s| *s != found.soul);
    let mut active: agent_configurations::ActiveModel = found.clone().into();
    if let Some(identity) = update.identity {
        active.identity = Set(identity);
    }
    if let Some(text) = update.operating_model {
        active.operating_model = Set(text);
    }
    if let Some(text) = update.interaction_learning {
        active.interaction_learning = Set(text);
    }
    if let Some(mode) = update.release_mode {
        active.release_mode = Set(mode.as_str().to_owned());
    }
    if soul_changed {
        let version = found.soul_version + 1;
        active.soul = Set(update.soul.clone().unwrap_or_default());
        active.soul_version = Set(version);
        let next = template::NewVersion {
            agent_id: found.id,
            version,
            forced: false,
            reason: None,
            author,
        };
        template::record(write, Kind::Soul, &next, update.soul).await?;
    }
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}
