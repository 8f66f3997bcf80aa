//! Admin routes for connectors and tools' bindings to them. Each handler parses
//! the request and calls [`crate::connectors::store`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422, E424};
use super::extract::{ApiJson, ApiPath, ApiQuery, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::connectors::pins::{self, ChangeFilter, ToolChangeList, ToolChangeView};
use crate::connectors::review;
use crate::connectors::store::{
    self, Binding, BindingView, ConnectorList, ConnectorUpdate, ConnectorView, NewConnector,
};
use crate::connectors::sync::{self, SyncReport, SyncRequest};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_connectors, create_connector))
        .routes(routes!(get_connector, update_connector, delete_connector))
        .routes(routes!(bind_tool))
        .routes(routes!(sync_connector))
        .routes(routes!(list_tool_changes))
        .routes(routes!(get_tool_change))
        .routes(routes!(accept_tool_change))
        .routes(routes!(reject_tool_change))
}

#[utoipa::path(get, path = "/v1/connectors", tag = "connectors", summary = "List connectors; header values are never shown (operator)",
    responses((status = 200, body = ConnectorList, description = "Live connectors by name"), E401, E403))]
async fn list_connectors(
    State(state): State<AppState>,
    _key: OperatorKey,
) -> ApiResult<Json<ConnectorList>> {
    Ok(Json(store::list(&state.db).await?))
}

#[utoipa::path(post, path = "/v1/connectors", tag = "connectors", summary = "Create an http (API) or mcp (MCP server) connector; the URL is checked (operator)",
    request_body = NewConnector,
    responses((status = 201, body = ConnectorView, description = "Created"), E400, E401, E403, E409, E413, E422))]
async fn create_connector(
    State(state): State<AppState>,
    _key: OperatorKey,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewConnector>,
) -> ApiResult<(StatusCode, Json<ConnectorView>)> {
    Ok((
        StatusCode::CREATED,
        Json(
            store::create(
                &state.writer(key(&idempotency)),
                &state.outbound,
                &state.secrets,
                new,
            )
            .await?,
        ),
    ))
}

#[utoipa::path(get, path = "/v1/connectors/{connector}", tag = "connectors", summary = "One connector (operator)",
    params(("connector" = String, Path)),
    responses((status = 200, body = ConnectorView, description = "The connector"), E400, E401, E403, E404))]
async fn get_connector(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ConnectorView>> {
    Ok(Json(store::get(&state.db, &name).await?))
}

#[utoipa::path(patch, path = "/v1/connectors/{connector}", tag = "connectors", summary = "Update a connector's URL, method, headers or timeout (operator)",
    params(("connector" = String, Path)), request_body = ConnectorUpdate,
    responses((status = 200, body = ConnectorView, description = "The connector as saved"), E400, E401, E403, E404, E413, E422))]
async fn update_connector(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(update): ApiJson<ConnectorUpdate>,
) -> ApiResult<Json<ConnectorView>> {
    Ok(Json(
        store::update(
            &state.writer(key(&idempotency)),
            &state.outbound,
            &state.secrets,
            &name,
            update,
        )
        .await?,
    ))
}

#[utoipa::path(delete, path = "/v1/connectors/{connector}", tag = "connectors", summary = "Soft-delete a connector; its tools become not connected (operator)",
    params(("connector" = String, Path)),
    responses((status = 200, body = ConnectorView, description = "The connector as deleted"), E400, E401, E403, E404, E422))]
async fn delete_connector(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
) -> ApiResult<Json<ConnectorView>> {
    Ok(Json(
        store::delete(&state.writer(key(&idempotency)), &name).await?,
    ))
}

#[utoipa::path(post, path = "/v1/connectors/{connector}/sync", tag = "connectors", summary = "Sync an MCP connector's tools into the registry; dry_run reports without writing (operator)",
    params(("connector" = String, Path)), request_body = SyncRequest,
    responses((status = 200, body = SyncReport, description = "Added, updated, unchanged, disabled and refused tools"), E400, E401, E403, E404, E413, E422, E424))]
async fn sync_connector(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(request): ApiJson<SyncRequest>,
) -> ApiResult<Json<SyncReport>> {
    Ok(Json(
        sync::run(
            &state.writer(key(&idempotency)),
            &state.remote(),
            &name,
            request,
        )
        .await?,
    ))
}

#[utoipa::path(put, path = "/v1/tools/{tool}/connector", tag = "connectors", summary = "Bind an api tool to an http connector or an mcp tool to an mcp one, or null to disconnect it (operator)",
    params(("tool" = String, Path)), request_body = Binding,
    responses((status = 200, body = BindingView, description = "The binding as set"), E400, E401, E403, E404, E413, E422))]
async fn bind_tool(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(tool): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(binding): ApiJson<Binding>,
) -> ApiResult<Json<BindingView>> {
    Ok(Json(
        store::bind(&state.writer(key(&idempotency)), &tool, binding).await?,
    ))
}

#[utoipa::path(get, path = "/v1/tool-changes", tag = "connectors", summary = "Synced tools' new or changed remote definitions held for an operator, newest first (operator)",
    params(ChangeFilter),
    responses((status = 200, body = ToolChangeList, description = "Held changes with the served and proposed descriptions and the classified schema changes"), E400, E401, E403, E404))]
async fn list_tool_changes(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiQuery(filter): ApiQuery<ChangeFilter>,
) -> ApiResult<Json<ToolChangeList>> {
    Ok(Json(pins::list(&state.db, filter).await?))
}

#[utoipa::path(get, path = "/v1/tool-changes/{id}", tag = "connectors", summary = "One held tool change (operator)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ToolChangeView, description = "The change"), E400, E401, E403, E404))]
async fn get_tool_change(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<ToolChangeView>> {
    Ok(Json(pins::get(&state.db, id).await?))
}

#[utoipa::path(post, path = "/v1/tool-changes/{id}/accept", tag = "connectors", summary = "Accept a held change: the tool serves it, pinned (a gated agent gets a revision to sign off) (operator)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ToolChangeView, description = "The change, accepted"), E400, E401, E403, E404, E409, E422))]
async fn accept_tool_change(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<ToolChangeView>> {
    Ok(Json(
        review::accept(&state.writer(key(&idempotency)), &who, id).await?,
    ))
}

#[utoipa::path(post, path = "/v1/tool-changes/{id}/reject", tag = "connectors", summary = "Reject a held change: the pin stays and the same definition is not held again (operator)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ToolChangeView, description = "The change, rejected"), E400, E401, E403, E404, E409))]
async fn reject_tool_change(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<ToolChangeView>> {
    Ok(Json(
        review::reject(&state.writer(key(&idempotency)), &who, id).await?,
    ))
}
