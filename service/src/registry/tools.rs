//! Tools as an admin edits them: create, update, soft-delete, with the definition
//! rules of `loadout check` applied before the write and the write guard after it.

use crate::db::Writer;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use entity::{agent_tools, tools};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::guard::{self, Problems};
use super::{Tier, ToolType};
use crate::db::page;
use crate::error::{Error, Result, check_name};

/// A tool as an admin sees it. `type` and `approval_tier` are shown as stored,
/// so a drifted value is visible here (and reported by `loadout check`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolView {
    pub name: String,
    /// `builtin`, `api` or `mcp`.
    #[serde(rename = "type")]
    pub tool_type: String,
    pub description: String,
    /// `auto`, `user_configurable` or `requires_approval`.
    pub approval_tier: String,
    /// The input's JSON Schema.
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// `false` for a synced tool an admin accepted loose on purpose (`allow_loose`):
    /// its schema is as its server sent it, and OpenAI gets it with `strict: false`.
    pub strict: bool,
    pub prompt_section: Option<String>,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
}

impl From<tools::Model> for ToolView {
    fn from(t: tools::Model) -> Self {
        Self {
            name: t.name,
            tool_type: t.tool_type,
            description: t.description,
            approval_tier: t.approval_tier,
            parameters: t.parameters,
            strict: t.strict,
            prompt_section: t.prompt_section,
            is_active: t.is_active,
            created_at: t.created_at,
            updated_at: t.updated_at,
            deleted_at: t.deleted_at,
        }
    }
}

/// A page of tools by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    pub tools: Vec<ToolView>,
    /// Pass as `after` for the next page; `null`: this page is the last.
    pub next_after: Option<String>,
}

/// The body of `POST /v1/tools`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTool {
    /// `verb_resource`, the verb one of get, create, update, delete, search, set, link.
    pub name: String,
    /// `api` when absent. Stored text; anything else is refused (422, `invalid_type`).
    #[serde(rename = "type", default = "api")]
    #[schema(value_type = ToolType)]
    pub tool_type: String,
    /// The model-facing description, 1 to 4096 bytes.
    pub description: String,
    /// Required: a tool's tier is a decision, never a default. An unknown tier is
    /// refused by the definition rules (422).
    #[schema(value_type = Tier)]
    pub approval_tier: String,
    /// A strict JSON Schema object for the arguments.
    #[schema(value_type = Object)]
    pub parameters: Value,
    pub prompt_section: Option<String>,
}

fn api() -> String {
    ToolType::Api.as_str().to_owned()
}

pub fn check_type(tool_type: &str) -> Result<ToolType> {
    tool_type.parse().map_err(|_| {
        Error::refused(
            "invalid_type",
            format!("type must be one of {}", ToolType::NAMES.join(", ")),
        )
    })
}

/// The fields of `PATCH /v1/tools/{tool}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolUpdate {
    pub description: Option<String>,
    #[schema(value_type = Option<Tier>)]
    pub approval_tier: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
    /// `null` removes the section.
    #[serde(default, deserialize_with = "crate::error::present")]
    #[schema(value_type = Option<String>)]
    pub prompt_section: Option<Option<String>>,
    pub is_active: Option<bool>,
}

/// One problem of a refused definition.
#[derive(Debug, Serialize)]
struct DefinitionProblem {
    code: &'static str,
    message: String,
    hint: String,
}

/// Refuses a definition the registry check would report as an error (422 with every
/// problem). `loose`: the schema is a synced tool's, taken as it is on purpose
/// (`strict` off), which the check reports as a warning instead.
pub fn check_definition(name: &str, tier: &str, schema: &Value, loose: bool) -> Result<()> {
    let singular = super::catalog::Seeds::shared()
        .map(|seeds| {
            seeds
                .catalog
                .tools
                .iter()
                .any(|t| t.name == name && t.singular)
        })
        .unwrap_or(false);
    let mut problems = super::check::definition_problems(name, tier, schema, singular);
    if loose {
        problems
            .retain(|(code, _, _)| *code != super::check::ProblemCode::SchemaNotStrict.as_str());
    }
    let Some((code, message, _)) = problems.first() else {
        return Ok(());
    };
    let (code, message) = (*code, message.clone());
    let problems = problems
        .into_iter()
        .map(|(code, message, hint)| DefinitionProblem {
            code,
            message,
            hint,
        })
        .collect();
    Err(Error::refused(code, message).with_details(Problems { problems }))
}

pub fn check_description(text: &str) -> Result<()> {
    if text.trim().is_empty() || text.len() > 4096 {
        return Err(Error::refused(
            "invalid_description",
            "description must be 1 to 4096 bytes of text",
        ));
    }
    Ok(())
}

/// The live tool of that name; 404 otherwise.
pub async fn row(db: &impl ConnectionTrait, name: &str) -> Result<tools::Model> {
    check_name("tool", name)?;
    tools::Entity::find()
        .filter(tools::Column::Name.eq(name))
        .filter(tools::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no tool named {name:?}")))
}

/// Which tools a list holds: all live ones unless narrowed.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    /// Only active (`true`) or inactive (`false`) tools.
    pub active: Option<bool>,
    /// Only tools whose name contains this text.
    pub search: Option<String>,
}

/// A page of live tools by name, narrowed by `filter`.
pub async fn list(
    db: &DatabaseConnection,
    filter: &Filter,
    page: &page::ByName,
) -> Result<ToolList> {
    let active = filter.active;
    let limit = crate::error::check_limit(page.limit)?;
    let mut find = tools::Entity::find()
        .filter(tools::Column::DeletedAt.is_null())
        .order_by_asc(tools::Column::Name)
        .limit(limit + 1);
    if let Some(active) = active {
        find = find.filter(tools::Column::IsActive.eq(active));
    }
    if let Some(after) = &page.after {
        find = find.filter(tools::Column::Name.gt(after.as_str()));
    }
    if let Some(text) = filter.search.as_deref().filter(|t| !t.is_empty()) {
        find = find.filter(tools::Column::Name.like(page::contains(text)));
    }
    let (rows, next_after) = page::cut(find.all(db).await?, limit, |t| t.name.clone());
    Ok(ToolList {
        tools: rows.into_iter().map(ToolView::from).collect(),
        next_after,
    })
}

/// For each live tool named, whether it is active and its tier (names not found are
/// left out).
pub async fn tiers_of(
    db: &DatabaseConnection,
    names: impl IntoIterator<Item = &String>,
) -> Result<BTreeMap<String, (bool, String)>> {
    let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
    let mut out = BTreeMap::new();
    // In chunks: a statement's bound parameters are limited (SQLite's 32,766).
    for chunk in names.chunks(500) {
        let rows: Vec<(String, bool, String)> = tools::Entity::find()
            .select_only()
            .column(tools::Column::Name)
            .column(tools::Column::IsActive)
            .column(tools::Column::ApprovalTier)
            .filter(tools::Column::DeletedAt.is_null())
            .filter(tools::Column::Name.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(db)
            .await?;
        out.extend(rows.into_iter().map(|(n, a, t)| (n, (a, t))));
    }
    Ok(out)
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<ToolView> {
    Ok(row(db, name).await?.into())
}

/// A tool's whole definition: what `POST /v1/tools` creates (strict, switched on),
/// what a configuration file or a connector sync sets.
#[derive(Debug, Clone)]
pub struct Definition {
    pub name: String,
    pub tool_type: String,
    pub description: String,
    pub approval_tier: String,
    pub parameters: Value,
    pub prompt_section: Option<String>,
    /// Off only for a synced schema taken as it is on purpose (`allow_loose`).
    pub strict: bool,
    pub active: bool,
}

impl From<NewTool> for Definition {
    fn from(new: NewTool) -> Self {
        Self {
            name: new.name,
            tool_type: new.tool_type,
            description: new.description,
            approval_tier: new.approval_tier,
            parameters: new.parameters,
            prompt_section: new.prompt_section,
            strict: true,
            active: true,
        }
    }
}

impl Definition {
    /// The rules a definition passes before it is written (422 otherwise). Against
    /// the row it replaces, a stored type or description it does not change is not
    /// judged again (a drifted row stays editable; `loadout check` reports it).
    fn check(&self, found: Option<&tools::Model>) -> Result<ToolType> {
        if found.is_none() {
            check_name("tool", &self.name)?;
        }
        let tool_type = match found {
            Some(row) if row.tool_type == self.tool_type => {
                self.tool_type.parse().unwrap_or(ToolType::Api)
            }
            _ => check_type(&self.tool_type)?,
        };
        if found.is_none_or(|row| row.description != self.description) {
            check_description(&self.description)?;
        }
        check_definition(
            &self.name,
            &self.approval_tier,
            &self.parameters,
            !self.strict,
        )?;
        Ok(tool_type)
    }
}

/// Creates a tool inside an open registry write.
pub async fn create_in(write: &guard::Write, def: Definition) -> Result<tools::Model> {
    write.covers_registry()?;
    let tool_type = def.check(None)?;
    let now = write.now();
    let name = def.name.clone();
    tools::ActiveModel {
        name: Set(def.name),
        tool_type: Set(tool_type.as_str().to_owned()),
        description: Set(def.description),
        approval_tier: Set(def.approval_tier),
        parameters: Set(def.parameters),
        prompt_section: Set(def.prompt_section),
        strict: Set(def.strict),
        is_active: Set(def.active),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&**write)
    .await
    .map_err(|e| {
        Error::from_db(e, || {
            format!("a tool named {name:?} exists (or existed: names of deleted tools stay taken)")
        })
    })
}

/// Replaces a live tool's definition inside an open registry write (its connector
/// binding stays: `connectors::store::bind_in` sets that).
pub async fn replace_in(
    write: &guard::Write,
    found: tools::Model,
    def: Definition,
) -> Result<tools::Model> {
    write.covers_registry()?;
    let tool_type = def.check(Some(&found))?;
    let changed_type = found.tool_type != def.tool_type;
    let mut active: tools::ActiveModel = found.into();
    if changed_type {
        active.tool_type = Set(tool_type.as_str().to_owned());
    }
    active.description = Set(def.description);
    active.approval_tier = Set(def.approval_tier);
    active.parameters = Set(def.parameters);
    active.prompt_section = Set(def.prompt_section);
    active.strict = Set(def.strict);
    active.is_active = Set(def.active);
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Applies `PATCH /v1/tools/{tool}` inside an open registry write. New parameters
/// are the admin's own: they must be strict, and make the tool so.
pub async fn update_in(
    write: &guard::Write,
    name: &str,
    update: ToolUpdate,
) -> Result<tools::Model> {
    let found = row(&**write, name).await?;
    if update.is_active == Some(true) && !found.is_active {
        refuse_unaccepted(&**write, &found).await?;
    }
    let def = Definition {
        name: found.name.clone(),
        tool_type: found.tool_type.clone(),
        description: update
            .description
            .unwrap_or_else(|| found.description.clone()),
        approval_tier: update
            .approval_tier
            .unwrap_or_else(|| found.approval_tier.clone()),
        strict: found.strict || update.parameters.is_some(),
        parameters: update
            .parameters
            .unwrap_or_else(|| found.parameters.clone()),
        prompt_section: update
            .prompt_section
            .unwrap_or_else(|| found.prompt_section.clone()),
        active: update.is_active.unwrap_or(found.is_active),
    };
    replace_in(write, found, def).await
}

/// 409 for switching on a synced tool whose `added` change waits for an operator:
/// accepting the change is what serves it (`connectors::pins`), so the pin and the
/// change's record stay true.
async fn refuse_unaccepted(db: &impl ConnectionTrait, found: &tools::Model) -> Result<()> {
    let waiting = entity::tool_changes::Entity::find()
        .filter(entity::tool_changes::Column::ToolId.eq(found.id))
        .filter(entity::tool_changes::Column::State.eq("pending"))
        .filter(entity::tool_changes::Column::Kind.eq("added"))
        .one(db)
        .await?;
    match waiting {
        Some(change) => Err(Error::conflict(format!(
            "{} waits for its held change {} to be accepted (POST /v1/tool-changes/{}/accept)",
            found.name, change.id, change.id
        ))),
        None => Ok(()),
    }
}

/// Soft-deletes a live tool inside an open registry write: the row stays with
/// `deleted_at` set, and its agent links are switched off.
pub async fn delete_in(write: &guard::Write, found: tools::Model) -> Result<tools::Model> {
    write.covers_registry()?;
    let now = write.now();
    agent_tools::Entity::update_many()
        .col_expr(agent_tools::Column::IsActive, Expr::value(false))
        .col_expr(agent_tools::Column::UpdatedAt, Expr::value(now))
        .filter(agent_tools::Column::ToolId.eq(found.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .exec(&**write)
        .await?;
    let mut active: tools::ActiveModel = found.into();
    active.is_active = Set(false);
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(&**write).await?)
}

/// What a connector sync writes about one tool of a remote server.
#[derive(Debug, Clone)]
pub struct Synced {
    pub connector_id: i32,
    /// The tool's name on its server.
    pub remote_name: String,
    /// The description and tier the server asks for now.
    pub description: String,
    pub tier: String,
    /// What the agent sees: the remote's schema normalized, or as sent when loose.
    pub schema: Value,
    /// The schema as the server sent it.
    pub remote_schema: Value,
    pub strict: bool,
    /// The remote definition's fingerprint (`connectors::pins`), pinned.
    pub fingerprint: String,
}

/// Creates a synced `mcp` tool inside an open registry write, switched on or
/// (`on` false: held for an operator) off.
pub async fn create_synced_in(
    write: &guard::Write,
    name: &str,
    synced: &Synced,
    on: bool,
) -> Result<tools::Model> {
    write.covers_registry()?;
    let now = write.now();
    let row = tools::ActiveModel {
        name: Set(name.to_owned()),
        tool_type: Set(ToolType::Mcp.as_str().to_owned()),
        description: Set(synced.description.clone()),
        approval_tier: Set(synced.tier.clone()),
        parameters: Set(synced.schema.clone()),
        prompt_section: Set(None),
        connector_id: Set(Some(synced.connector_id)),
        remote_name: Set(Some(synced.remote_name.clone())),
        synced_description: Set(Some(synced.description.clone())),
        synced_tier: Set(Some(synced.tier.clone())),
        remote_gone_at: Set(None),
        remote_schema: Set(Some(synced.remote_schema.clone())),
        strict: Set(synced.strict),
        pinned_fingerprint: Set(Some(synced.fingerprint.clone())),
        is_active: Set(on),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    };
    Ok(row.insert(&**write).await?)
}

/// Brings a synced tool in line with its server inside an open registry write:
/// `description` and `approval_tier` as the sync decided (an admin's edit kept);
/// a tool whose remote came back is switched on again.
pub async fn update_synced_in(
    write: &guard::Write,
    row: tools::Model,
    description: String,
    approval_tier: String,
    synced: &Synced,
) -> Result<tools::Model> {
    write.covers_registry()?;
    let came_back = row.remote_gone_at.is_some();
    let mut active: tools::ActiveModel = row.into();
    active.description = Set(description);
    active.approval_tier = Set(approval_tier);
    active.parameters = Set(synced.schema.clone());
    active.remote_schema = Set(Some(synced.remote_schema.clone()));
    active.strict = Set(synced.strict);
    active.pinned_fingerprint = Set(Some(synced.fingerprint.clone()));
    active.synced_description = Set(Some(synced.description.clone()));
    active.synced_tier = Set(Some(synced.tier.clone()));
    if came_back {
        active.remote_gone_at = Set(None);
        active.is_active = Set(true);
    }
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Records the fingerprint of the remote definition a synced tool serves, inside
/// an open registry write.
pub async fn pin_in(
    write: &guard::Write,
    row: tools::Model,
    fingerprint: &str,
) -> Result<tools::Model> {
    write.covers_registry()?;
    if row.pinned_fingerprint.as_deref() == Some(fingerprint) {
        return Ok(row);
    }
    let mut active: tools::ActiveModel = row.into();
    active.pinned_fingerprint = Set(Some(fingerprint.to_owned()));
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Switches on a synced tool an operator accepted, inside an open registry write.
pub async fn switch_on_in(write: &guard::Write, row: tools::Model) -> Result<tools::Model> {
    write.covers_registry()?;
    let mut active: tools::ActiveModel = row.into();
    active.is_active = Set(true);
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Switches off a synced tool whose remote tool is gone, inside an open registry
/// write.
pub async fn mark_gone_in(write: &guard::Write, row: tools::Model) -> Result<tools::Model> {
    write.covers_registry()?;
    let now = write.now();
    let mut active: tools::ActiveModel = row.into();
    active.is_active = Set(false);
    active.remote_gone_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(&**write).await?)
}

pub async fn create(w: &Writer<'_>, new: NewTool) -> Result<ToolView> {
    let def = Definition::from(new);
    def.check(None)?;
    let mut write = w.begin().await?;
    let saved = create_in(&write, def).await?;
    write.changes_tool(saved.id);
    w.commit(write).await?;
    Ok(saved.into())
}

/// Updates a tool; the tool as it would be after the update must pass the check.
pub async fn update(w: &Writer<'_>, name: &str, update: ToolUpdate) -> Result<ToolView> {
    if let Some(text) = &update.description {
        check_description(text)?;
    }
    let mut write = w.begin().await?;
    let saved = update_in(&write, name, update).await?;
    write.changes_tool(saved.id);
    w.commit(write).await?;
    Ok(saved.into())
}

/// Soft delete: the row stays with `deleted_at` set, and its agent links are switched off.
pub async fn delete(w: &Writer<'_>, name: &str) -> Result<ToolView> {
    let mut write = w.begin().await?;
    let found = row(&*write, name).await?;
    write.changes_tool(found.id);
    let saved = delete_in(&write, found).await?;
    w.commit(write).await?;
    Ok(saved.into())
}
