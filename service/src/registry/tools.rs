//! Tools as an admin edits them: create, update, soft-delete, with the definition
//! rules of `loadout check` applied before the write and the write guard after it.

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
use crate::cache::Generation;
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

pub async fn create(
    db: &DatabaseConnection,
    generation: &Generation,
    new: NewTool,
) -> Result<ToolView> {
    check_name("tool", &new.name)?;
    let tool_type = check_type(&new.tool_type)?;
    check_description(&new.description)?;
    check_definition(&new.name, &new.approval_tier, &new.parameters, false)?;
    let mut write = guard::begin(db).await?;
    let now = Utc::now();
    let name = new.name.clone();
    let saved = tools::ActiveModel {
        name: Set(new.name),
        tool_type: Set(tool_type.as_str().to_owned()),
        description: Set(new.description),
        approval_tier: Set(new.approval_tier),
        parameters: Set(new.parameters),
        prompt_section: Set(new.prompt_section),
        is_active: Set(true),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&*write)
    .await
    .map_err(|e| {
        Error::from_db(e, || {
            format!("a tool named {name:?} exists (or existed: names of deleted tools stay taken)")
        })
    })?;
    write.changes_tool(saved.id);
    guard::commit(write, generation).await?;
    Ok(saved.into())
}

/// Updates a tool; the tool as it would be after the update must pass the check.
pub async fn update(
    db: &DatabaseConnection,
    generation: &Generation,
    name: &str,
    update: ToolUpdate,
) -> Result<ToolView> {
    if let Some(text) = &update.description {
        check_description(text)?;
    }
    let mut write = guard::begin(db).await?;
    let found = row(&*write, name).await?;
    write.changes_tool(found.id);
    let tier = update
        .approval_tier
        .as_deref()
        .unwrap_or(&found.approval_tier);
    // New parameters are the admin's own: they must be strict, and make the tool so.
    let loose = !found.strict && update.parameters.is_none();
    check_definition(
        &found.name,
        tier,
        update.parameters.as_ref().unwrap_or(&found.parameters),
        loose,
    )?;
    let mut active: tools::ActiveModel = found.into();
    if let Some(text) = update.description {
        active.description = Set(text);
    }
    if let Some(tier) = update.approval_tier {
        active.approval_tier = Set(tier);
    }
    if let Some(schema) = update.parameters {
        active.parameters = Set(schema);
        active.strict = Set(true);
    }
    if let Some(section) = update.prompt_section {
        active.prompt_section = Set(section);
    }
    if let Some(on) = update.is_active {
        active.is_active = Set(on);
    }
    active.updated_at = Set(Utc::now());
    let saved = active.update(&*write).await?;
    guard::commit(write, generation).await?;
    Ok(saved.into())
}

/// Soft delete: the row stays with `deleted_at` set, and its agent links are switched off.
pub async fn delete(
    db: &DatabaseConnection,
    generation: &Generation,
    name: &str,
) -> Result<ToolView> {
    let mut write = guard::begin(db).await?;
    let found = row(&*write, name).await?;
    write.changes_tool(found.id);
    let now = Utc::now();
    agent_tools::Entity::update_many()
        .col_expr(agent_tools::Column::IsActive, Expr::value(false))
        .col_expr(agent_tools::Column::UpdatedAt, Expr::value(now))
        .filter(agent_tools::Column::ToolId.eq(found.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .exec(&*write)
        .await?;
    let mut active: tools::ActiveModel = found.into();
    active.is_active = Set(false);
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let saved = active.update(&*write).await?;
    guard::commit(write, generation).await?;
    Ok(saved.into())
}
