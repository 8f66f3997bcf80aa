//! Admin endpoints for connectors and tool bindings. Header values are write-only:
//! responses show header names, never values. URLs are checked when saved (and
//! again before every call).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use entity::{connectors, tools};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::agents::{begin, commit};
use super::fetch::{check_name, json_body};
use super::error::{ApiError, ApiResult};
use super::extract::AdminKey;
use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_connectors, create_connector))
        .routes(routes!(get_connector, update_connector, delete_connector))
        .routes(routes!(bind_tool))
}

fn connector_json(c: &connectors::Model) -> Value {
    let header_names: Vec<&String> = c
        .headers
        .as_object()
        .map(|h| h.keys().collect())
        .unwrap_or_default();
    json!({
        "name": c.name,
        "kind": c.kind,
        "url": c.url,
        "method": c.method,
        "headers": header_names,
        "timeout_ms": c.timeout_ms,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    })
}

async fn connector_row(db: &impl ConnectionTrait, name: &str) -> ApiResult<connectors::Model> {
    check_name("connector", name)?;
    connectors::Entity::find()
        .filter(connectors::Column::Name.eq(name))
        .filter(connectors::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no connector named {name:?}")))
}

fn check_method(method: &str) -> ApiResult<()> {
    if matches!(method, "POST" | "PUT") {
        Ok(())
    } else {
        Err(ApiError::unprocessable(
            "invalid_method",
            "method must be POST or PUT",
        ))
    }
}

fn check_timeout(ms: i32) -> ApiResult<()> {
    if (1..=120_000).contains(&ms) {
        Ok(())
    } else {
        Err(ApiError::unprocessable(
            "invalid_timeout",
            "timeout_ms must be 1 to 120000",
        ))
    }
}

fn check_headers(headers: &Map<String, Value>) -> ApiResult<()> {
    for (name, value) in headers {
        let ok_name = hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
        let ok_value = value
            .as_str()
            .is_some_and(|v| hyper::header::HeaderValue::from_str(v).is_ok());
        if !ok_name || !ok_value {
            return Err(ApiError::unprocessable(
                "invalid_headers",
                format!("header {name:?} must be a valid name with a string value"),
            ));
        }
    }
    Ok(())
}

async fn check_url(state: &AppState, url: &str) -> ApiResult<()> {
    crate::actions::connector::check_url(url, &state.connector_allow)
        .await
        .map(drop)
        .map_err(|e| ApiError::unprocessable("url_refused", e.to_string()))
}

#[utoipa::path(get, path = "/v1/connectors", tag = "connectors", summary = "List connectors; header values are never shown (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_connectors(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Response> {
    let rows = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .order_by_asc(connectors::Column::Name)
        .all(&state.db)
        .await?;
    let listed: Vec<Value> = rows.iter().map(connector_json).collect();
    Ok(axum::Json(json!({ "connectors": listed })).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewConnector {
    name: String,
    url: String,
    #[serde(default = "post")]
    method: String,
    #[serde(default)]
    headers: Map<String, Value>,
    #[serde(default = "thirty_seconds")]
    timeout_ms: i32,
}

fn post() -> String {
    "POST".to_owned()
}

fn thirty_seconds() -> i32 {
    30_000
}

#[utoipa::path(post, path = "/v1/connectors", tag = "connectors", summary = "Create an HTTP API connector; the URL is checked (admin)", responses((status = 201, description = "JSON; errors use the one error shape")))]
async fn create_connector(
    State(state): State<AppState>,
    _key: AdminKey,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let new: NewConnector = json_body(body)?;
    check_name("connector", &new.name)?;
    check_method(&new.method)?;
    check_timeout(new.timeout_ms)?;
    check_headers(&new.headers)?;
    check_url(&state, &new.url).await?;
    let txn = begin(&state).await?;
    if connectors::Entity::find()
        .filter(connectors::Column::Name.eq(new.name.as_str()))
        .one(&*txn)
        .await?
        .is_some()
    {
        return Err(ApiError::conflict(format!(
            "a connector named {:?} exists",
            new.name
        )));
    }
    let now = Utc::now();
    let saved = connectors::ActiveModel {
        name: Set(new.name),
        kind: Set("api".to_owned()),
        url: Set(new.url),
        method: Set(new.method),
        headers: Set(Value::Object(new.headers)),
        timeout_ms: Set(new.timeout_ms),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&*txn)
    .await?;
    commit(&state, txn).await?;
    Ok((StatusCode::CREATED, axum::Json(connector_json(&saved))).into_response())
}

#[utoipa::path(get, path = "/v1/connectors/{connector}", tag = "connectors", summary = "One connector (admin)", params(("connector" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_connector(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    Ok(axum::Json(connector_json(&connector_row(&state.db, &name).await?)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectorUpdate {
    url: Option<String>,
    method: Option<String>,
    headers: Option<Map<String, Value>>,
    timeout_ms: Option<i32>,
}

#[utoipa::path(patch, path = "/v1/connectors/{connector}", tag = "connectors", summary = "Update a connector's URL, method, headers or timeout (admin)", params(("connector" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn update_connector(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let update: ConnectorUpdate = json_body(body)?;
    if let Some(method) = &update.method {
        check_method(method)?;
    }
    if let Some(ms) = update.timeout_ms {
        check_timeout(ms)?;
    }
    if let Some(headers) = &update.headers {
        check_headers(headers)?;
    }
    if let Some(url) = &update.url {
        check_url(&state, url).await?;
    }
    let txn = begin(&state).await?;
    let row = connector_row(&*txn, &name).await?;
    let mut active: connectors::ActiveModel = row.into();
    if let Some(url) = update.url {
        active.url = Set(url);
    }
    if let Some(method) = update.method {
        active.method = Set(method);
    }
    if let Some(headers) = update.headers {
        active.headers = Set(Value::Object(headers));
    }
    if let Some(ms) = update.timeout_ms {
        active.timeout_ms = Set(ms);
    }
    active.updated_at = Set(Utc::now());
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(connector_json(&saved)).into_response())
}

#[utoipa::path(delete, path = "/v1/connectors/{connector}", tag = "connectors", summary = "Soft-delete a connector; its tools become not connected (admin)", params(("connector" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn delete_connector(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let txn = begin(&state).await?;
    let row = connector_row(&*txn, &name).await?;
    let now = Utc::now();
    let mut active: connectors::ActiveModel = row.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(connector_json(&saved)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Binding {
    /// A connector name, or `null` to disconnect the tool.
    connector: Option<String>,
}

#[utoipa::path(put, path = "/v1/tools/{tool}/connector", tag = "connectors", summary = "Bind an api tool to a connector, or null to disconnect it (admin)", params(("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn bind_tool(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(tool): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let binding: Binding = json_body(body)?;
    check_name("tool", &tool)?;
    let txn = begin(&state).await?;
    let row = tools::Entity::find()
        .filter(tools::Column::Name.eq(tool.as_str()))
        .filter(tools::Column::DeletedAt.is_null())
        .one(&*txn)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no tool named {tool:?}")))?;
    if row.tool_type != "api" {
        return Err(ApiError::unprocessable(
            "not_an_api_tool",
            format!(
                "{tool} is a {} tool; only api tools take a connector",
                row.tool_type
            ),
        ));
    }
    let connector_id = match &binding.connector {
        Some(name) => Some(connector_row(&*txn, name).await?.id),
        None => None,
    };
    let mut active: tools::ActiveModel = row.into();
    active.connector_id = Set(connector_id);
    active.updated_at = Set(Utc::now());
    active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(json!({"tool": tool, "connector": binding.connector})).into_response())
}
