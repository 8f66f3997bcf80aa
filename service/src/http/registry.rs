//! Admin routes for the tool registry: tools, agents' links, channels and the
//! `loadout check` report. Each handler parses the request and calls
//! [`crate::registry`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::db::page;
use crate::registry::channels::{self, ChannelList, ChannelUpdate, ChannelView};
use crate::registry::check::Report;
use crate::registry::links::{self, LinkList, LinkSet};
use crate::registry::tools::{self, NewTool, ToolList, ToolUpdate, ToolView};

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

#[utoipa::path(get, path = "/v1/registry/check", tag = "registry", summary = "The `loadout check` report as JSON (admin)",
    responses((status = 200, body = Report, description = "The report"), E401, E403))]
async fn registry_check(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Json<Report>> {
    Ok(Json(
        crate::registry::check::current(&state.db, &state.secrets).await?,
    ))
}

/// Which tools to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ToolFilter {
    /// Only active (`true`) or inactive (`false`) tools; all when absent.
    active: Option<bool>,
    /// Only tools whose name contains this text.
    search: Option<String>,
    /// Tools in the page: 1 to 1,000, 100 unless given.
    limit: Option<u64>,
    /// The previous page's `next_after`: the page starts after this name.
    after: Option<String>,
}

#[utoipa::path(get, path = "/v1/tools", tag = "registry", summary = "List tools by name, a page at a time, optionally by active state (admin)",
    params(ToolFilter),
    responses((status = 200, body = ToolList, description = "A page of live tools by name"), E400, E401, E403))]
async fn list_tools(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiQuery(q): ApiQuery<ToolFilter>,
) -> ApiResult<Json<ToolList>> {
    let page = page::ByName {
        limit: q.limit,
        after: q.after,
    };
    let filter = tools::Filter {
        active: q.active,
        search: q.search,
    };
    Ok(Json(tools::list(&state.db, &filter, &page).await?))
}

#[utoipa::path(get, path = "/v1/tools/{tool}", tag = "registry", summary = "One tool (admin)",
    params(("tool" = String, Path)),
    responses((status = 200, body = ToolView, description = "The tool"), E400, E401, E403, E404))]
async fn get_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ToolView>> {
    Ok(Json(tools::get(&state.db, &name).await?))
}

#[utoipa::path(post, path = "/v1/tools", tag = "registry", summary = "Create a tool: verb vocabulary, required tier, JSON Schema (operator)",
    request_body = NewTool,
    responses((status = 201, body = ToolView, description = "Created"), E400, E401, E403, E409, E413, E422))]
async fn create_tool(
    State(state): State<AppState>,
    _key: OperatorKey,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewTool>,
) -> ApiResult<(StatusCode, Json<ToolView>)> {
    Ok((
        StatusCode::CREATED,
        Json(tools::create(&state.writer(key(&idempotency)), new).await?),
    ))
}

#[utoipa::path(patch, path = "/v1/tools/{tool}", tag = "registry", summary = "Update description, tier, schema, prompt section or active (operator)",
    params(("tool" = String, Path)), request_body = ToolUpdate,
    responses((status = 200, body = ToolView, description = "The tool as saved"), E400, E401, E403, E404, E413, E422))]
async fn update_tool(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(update): ApiJson<ToolUpdate>,
) -> ApiResult<Json<ToolView>> {
    Ok(Json(
        tools::update(&state.writer(key(&idempotency)), &name, update).await?,
    ))
}

/// Soft delete: the row stays with `deleted_at` set, and its agent links are switched off.
#[utoipa::path(delete, path = "/v1/tools/{tool}", tag = "registry", summary = "Soft-delete a tool and switch off its links (operator)",
    params(("tool" = String, Path)),
    responses((status = 200, body = ToolView, description = "The tool as deleted"), E400, E401, E403, E404, E422))]
async fn delete_tool(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
) -> ApiResult<Json<ToolView>> {
    Ok(Json(
        tools::delete(&state.writer(key(&idempotency)), &name).await?,
    ))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/links", tag = "registry", summary = "The agent's tool links (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = LinkList, description = "Links by tool name"), E400, E401, E403, E404))]
async fn list_links(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(agent): ApiPath<String>,
) -> ApiResult<Json<LinkList>> {
    Ok(Json(links::list(&state.db, &agent).await?))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/links/{tool}", tag = "registry", summary = "Attach a tool to an agent (operator)",
    params(("agent" = String, Path), ("tool" = String, Path)),
    responses((status = 200, body = LinkSet, description = "The link, on"), E400, E401, E403, E404, E422))]
async fn attach(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath((agent, tool)): ApiPath<(String, String)>,
    idempotency: Idempotency,
) -> ApiResult<Json<LinkSet>> {
    Ok(Json(
        links::set(&state.writer(key(&idempotency)), &agent, &tool, true).await?,
    ))
}

/// Switches the link off; the row stays.
#[utoipa::path(delete, path = "/v1/agents/{agent}/links/{tool}", tag = "registry", summary = "Switch a link off; the row stays (operator)",
    params(("agent" = String, Path), ("tool" = String, Path)),
    responses((status = 200, body = LinkSet, description = "The link, off"), E400, E401, E403, E404, E422))]
async fn detach(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath((agent, tool)): ApiPath<(String, String)>,
    idempotency: Idempotency,
) -> ApiResult<Json<LinkSet>> {
    Ok(Json(
        links::set(&state.writer(key(&idempotency)), &agent, &tool, false).await?,
    ))
}

#[utoipa::path(get, path = "/v1/channels", tag = "registry", summary = "List channels (admin)",
    responses((status = 200, body = ChannelList, description = "Channels by name"), E401, E403))]
async fn list_channels(
    State(state): State<AppState>,
    _key: AdminKey,
) -> ApiResult<Json<ChannelList>> {
    Ok(Json(channels::list(&state.db).await?))
}

#[utoipa::path(get, path = "/v1/channels/{channel}", tag = "registry", summary = "One channel (admin)",
    params(("channel" = String, Path)),
    responses((status = 200, body = ChannelView, description = "The channel"), E400, E401, E403, E404))]
async fn get_channel(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ChannelView>> {
    Ok(Json(channels::get(&state.db, &name).await?))
}

#[utoipa::path(patch, path = "/v1/channels/{channel}", tag = "registry", summary = "Update a channel's guidance and sections (operator)",
    params(("channel" = String, Path)), request_body = ChannelUpdate,
    responses((status = 200, body = ChannelView, description = "The channel as saved"), E400, E401, E403, E404, E413, E422))]
async fn update_channel(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(update): ApiJson<ChannelUpdate>,
) -> ApiResult<Json<ChannelView>> {
    Ok(Json(
        channels::update(&state.writer(key(&idempotency)), &name, update).await?,
    ))
}
