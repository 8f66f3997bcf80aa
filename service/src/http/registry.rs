//! Admin endpoints for the tool registry, agent ↔ tool links and channels.
//! Deletes are soft; every write bumps the configuration generation.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use entity::{agent_tools, channels, tools};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::agents::{agent_row, commit};
use super::fetch::{check_name, json_body};
use super::error::{ApiError, ApiResult};
use super::extract::AdminKey;
use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tools, create_tool))
        .routes(routes!(get_tool, update_tool, delete_tool))
        .routes(routes!(list_links))
        .routes(routes!(attach, detach))
        .routes(routes!(registry_check))
        .routes(routes!(list_channels))
        .routes(routes!(get_channel, update_channel))
}

const TYPES: [&str; 3] = ["builtin", "api", "mcp"];

/// Refuses a definition the registry check would report as an error (422 with every problem).
fn check_definition(name: &str, tier: &str, schema: &Value) -> ApiResult<()> {
    let singular = crate::registry::catalog::Seeds::embedded()
        .map(|seeds| {
            seeds
                .catalog
                .tools
                .iter()
                .any(|t| t.name == name && t.singular)
        })
        .unwrap_or(false);
    let problems = crate::registry::check::definition_problems(name, tier, schema, singular);
    let Some((code, message, _)) = problems.first() else {
        return Ok(());
    };
    let details: Vec<Value> = problems
        .iter()
        .map(|(code, message, hint)| json!({"code": code, "message": message, "hint": hint}))
        .collect();
    Err(ApiError::unprocessable(code, message.clone()).with_details(json!({ "problems": details })))
}

#[utoipa::path(get, path = "/v1/registry/check", tag = "registry", summary = "The `loadout check` report as JSON (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn registry_check(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Response> {
    let catalog = &crate::registry::catalog::Seeds::shared()
        .map_err(ApiError::internal)?
        .catalog;
    let report = crate::registry::check::run(
        &state.db,
        catalog,
        &crate::actions::executors::Executors::load(&state.db, Vec::new()).await?,
    )
    .await?;
    Ok(axum::Json(report).into_response())
}

fn tool_json(t: &tools::Model) -> Value {
    json!({
        "name": t.name,
        "type": t.tool_type,
        "description": t.description,
        "approval_tier": t.approval_tier,
        "parameters": t.parameters,
        "prompt_section": t.prompt_section,
        "is_active": t.is_active,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "deleted_at": t.deleted_at,
    })
}

async fn tool_row(db: &impl ConnectionTrait, name: &str) -> ApiResult<tools::Model> {
    check_name("tool", name)?;
    tools::Entity::find()
        .filter(tools::Column::Name.eq(name))
        .filter(tools::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no tool named {name:?}")))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFilter {
    active: Option<bool>,
}

#[utoipa::path(get, path = "/v1/tools", tag = "registry", summary = "List tools, optionally by active state (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_tools(
    State(state): State<AppState>,
    _key: AdminKey,
    q: Result<Query<ToolFilter>, QueryRejection>,
) -> ApiResult<Response> {
    let q = q
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    let mut find = tools::Entity::find()
        .filter(tools::Column::DeletedAt.is_null())
        .order_by_asc(tools::Column::Name);
    if let Some(active) = q.active {
        find = find.filter(tools::Column::IsActive.eq(active));
    }
    let rows = find.all(&state.db).await?;
    let listed: Vec<Value> = rows.iter().map(tool_json).collect();
    Ok(axum::Json(json!({ "tools": listed })).into_response())
}

#[utoipa::path(get, path = "/v1/tools/{tool}", tag = "registry", summary = "One tool (admin)", params(("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    Ok(axum::Json(tool_json(&tool_row(&state.db, &name).await?)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTool {
    name: String,
    #[serde(rename = "type", default = "api")]
    tool_type: String,
    description: String,
    /// Required: a tool's tier is a decision, never a default.
    approval_tier: String,
    parameters: Value,
    prompt_section: Option<String>,
}

fn api() -> String {
    "api".to_owned()
}

fn check_type(tool_type: &str) -> ApiResult<()> {
    if TYPES.contains(&tool_type) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(
            "invalid_type",
            format!("type must be one of {}", TYPES.join(", ")),
        ))
    }
}

fn check_description(text: &str) -> ApiResult<()> {
    if text.trim().is_empty() || text.len() > 4096 {
        return Err(ApiError::unprocessable(
            "invalid_description",
            "description must be 1 to 4096 bytes of text",
        ));
    }
    Ok(())
}

#[utoipa::path(post, path = "/v1/tools", tag = "registry", summary = "Create a tool: verb vocabulary, required tier, JSON Schema (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn create_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let new: NewTool = json_body(body)?;
    check_name("tool", &new.name)?;
    check_type(&new.tool_type)?;
    check_description(&new.description)?;
    check_definition(&new.name, &new.approval_tier, &new.parameters)?;
    let txn = super::agents::begin(&state).await?;
    let exists = tools::Entity::find()
        .filter(tools::Column::Name.eq(new.name.as_str()))
        .one(&*txn)
        .await?;
    if let Some(existing) = exists {
        let how = if existing.deleted_at.is_some() {
            "a deleted tool still holds that name"
        } else {
            "a tool with that name exists"
        };
        return Err(ApiError::conflict(format!("{how}: {:?}", new.name)));
    }
    let now = Utc::now();
    let saved = tools::ActiveModel {
        name: Set(new.name),
        tool_type: Set(new.tool_type),
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
    .insert(&*txn)
    .await?;
    commit(&state, txn).await?;
    Ok((StatusCode::CREATED, axum::Json(tool_json(&saved))).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolUpdate {
    description: Option<String>,
    approval_tier: Option<String>,
    parameters: Option<Value>,
    prompt_section: Option<Option<String>>,
    is_active: Option<bool>,
}

#[utoipa::path(patch, path = "/v1/tools/{tool}", tag = "registry", summary = "Update description, tier, schema, prompt section or active (admin)", params(("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn update_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let update: ToolUpdate = json_body(body)?;
    if let Some(text) = &update.description {
        check_description(text)?;
    }
    let txn = super::agents::begin(&state).await?;
    let row = tool_row(&*txn, &name).await?;
    // The tool as it would be after the update must pass the registry check.
    check_definition(
        &row.name,
        update
            .approval_tier
            .as_deref()
            .unwrap_or(&row.approval_tier),
        update.parameters.as_ref().unwrap_or(&row.parameters),
    )?;
    let mut active: tools::ActiveModel = row.into();
    if let Some(text) = update.description {
        active.description = Set(text);
    }
    if let Some(tier) = update.approval_tier {
        active.approval_tier = Set(tier);
    }
    if let Some(schema) = update.parameters {
        active.parameters = Set(schema);
    }
    if let Some(section) = update.prompt_section {
        active.prompt_section = Set(section);
    }
    if let Some(on) = update.is_active {
        active.is_active = Set(on);
    }
    active.updated_at = Set(Utc::now());
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(tool_json(&saved)).into_response())
}

/// Soft delete: the row stays with `deleted_at` set, and its agent links are switched off.
#[utoipa::path(delete, path = "/v1/tools/{tool}", tag = "registry", summary = "Soft-delete a tool and switch off its links (admin)", params(("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn delete_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let txn = super::agents::begin(&state).await?;
    let row = tool_row(&*txn, &name).await?;
    let now = Utc::now();
    agent_tools::Entity::update_many()
        .col_expr(agent_tools::Column::IsActive, Expr::value(false))
        .col_expr(agent_tools::Column::UpdatedAt, Expr::value(now))
        .filter(agent_tools::Column::ToolId.eq(row.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .exec(&*txn)
        .await?;
    let mut active: tools::ActiveModel = row.into();
    active.is_active = Set(false);
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(tool_json(&saved)).into_response())
}

#[utoipa::path(get, path = "/v1/agents/{agent}/links", tag = "registry", summary = "The agent's tool links (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_links(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(agent): Path<String>,
) -> ApiResult<Response> {
    let agent = agent_row(&state.db, &agent).await?;
    let rows = agent_tools::Entity::find()
        .find_also_related(tools::Entity)
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .all(&state.db)
        .await?;
    let mut links: Vec<Value> = rows
        .iter()
        .filter_map(|(link, tool)| {
            let tool = tool.as_ref()?;
            Some(json!({
                "tool": tool.name,
                "active": link.is_active,
                "tool_active": tool.is_active && tool.deleted_at.is_none(),
            }))
        })
        .collect();
    links.sort_by(|a, b| a["tool"].as_str().cmp(&b["tool"].as_str()));
    Ok(axum::Json(json!({"agent": agent.name, "links": links})).into_response())
}

async fn set_link(state: &AppState, agent: &str, tool: &str, on: bool) -> ApiResult<Response> {
    let txn = super::agents::begin(state).await?;
    let agent = agent_row(&*txn, agent).await?;
    let tool = tool_row(&*txn, tool).await?;
    let now = Utc::now();
    let existing = agent_tools::Entity::find()
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::ToolId.eq(tool.id))
        .one(&*txn)
        .await?;
    match existing {
        Some(link) => {
            let mut active: agent_tools::ActiveModel = link.into();
            active.is_active = Set(on);
            active.deleted_at = Set(None);
            active.updated_at = Set(now);
            active.update(&*txn).await?;
        }
        None if on => {
            agent_tools::ActiveModel {
                agent_id: Set(agent.id),
                tool_id: Set(tool.id),
                is_active: Set(true),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(&*txn)
            .await?;
        }
        None => {
            return Err(ApiError::not_found(format!(
                "agent {:?} has no link to {:?}",
                agent.name, tool.name
            )));
        }
    }
    commit(state, txn).await?;
    Ok(axum::Json(json!({"agent": agent.name, "tool": tool.name, "active": on})).into_response())
}

#[utoipa::path(put, path = "/v1/agents/{agent}/links/{tool}", tag = "registry", summary = "Attach a tool to an agent (admin)", params(("agent" = String, Path), ("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn attach(
    State(state): State<AppState>,
    _key: AdminKey,
    Path((agent, tool)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_link(&state, &agent, &tool, true).await
}

/// Switches the link off; the row stays.
#[utoipa::path(delete, path = "/v1/agents/{agent}/links/{tool}", tag = "registry", summary = "Switch a link off; the row stays (admin)", params(("agent" = String, Path), ("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn detach(
    State(state): State<AppState>,
    _key: AdminKey,
    Path((agent, tool)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_link(&state, &agent, &tool, false).await
}

fn channel_json(c: &channels::Model) -> Value {
    json!({
        "name": c.name,
        "description": c.description,
        "guidance": c.guidance,
        "include_operating_model": c.include_operating_model,
        "include_interaction_learning": c.include_interaction_learning,
        "include_session_section": c.include_session_section,
        "updated_at": c.updated_at,
    })
}

async fn channel_row(db: &impl ConnectionTrait, name: &str) -> ApiResult<channels::Model> {
    check_name("channel", name)?;
    channels::Entity::find()
        .filter(channels::Column::Name.eq(name))
        .filter(channels::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no channel named {name:?}")))
}

#[utoipa::path(get, path = "/v1/channels", tag = "registry", summary = "List channels (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_channels(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Response> {
    let rows = channels::Entity::find()
        .filter(channels::Column::DeletedAt.is_null())
        .order_by_asc(channels::Column::Name)
        .all(&state.db)
        .await?;
    let listed: Vec<Value> = rows.iter().map(channel_json).collect();
    Ok(axum::Json(json!({ "channels": listed })).into_response())
}

#[utoipa::path(get, path = "/v1/channels/{channel}", tag = "registry", summary = "One channel (admin)", params(("channel" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_channel(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    Ok(axum::Json(channel_json(&channel_row(&state.db, &name).await?)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelUpdate {
    description: Option<String>,
    guidance: Option<String>,
    include_operating_model: Option<bool>,
    include_interaction_learning: Option<bool>,
    include_session_section: Option<bool>,
}

#[utoipa::path(patch, path = "/v1/channels/{channel}", tag = "registry", summary = "Update a channel's guidance and sections (admin)", params(("channel" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn update_channel(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let update: ChannelUpdate = json_body(body)?;
    if update
        .guidance
        .as_ref()
        .is_some_and(|g| g.len() > 64 * 1024)
    {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "guidance is limited to 65536 bytes",
        ));
    }
    let txn = super::agents::begin(&state).await?;
    let row = channel_row(&*txn, &name).await?;
    let mut active: channels::ActiveModel = row.into();
    if let Some(text) = update.description {
        active.description = Set(text);
    }
    if let Some(text) = update.guidance {
        active.guidance = Set(text);
    }
    if let Some(on) = update.include_operating_model {
        active.include_operating_model = Set(on);
    }
    if let Some(on) = update.include_interaction_learning {
        active.include_interaction_learning = Set(on);
    }
    if let Some(on) = update.include_session_section {
        active.include_session_section = Set(on);
    }
    active.updated_at = Set(Utc::now());
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(channel_json(&saved)).into_response())
}
