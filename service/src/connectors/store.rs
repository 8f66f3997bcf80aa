//! Connectors as an admin stores them, and tools' bindings to them. Header values
//! are write-only: views show header names, never values. URLs are checked when
//! saved, and again before every call.

use chrono::{DateTime, Utc};
use entity::{connectors, tools};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::connectors::client::{
    Kind, Outbound, RESERVED_HEADERS, mcp, reserved, same_origin, sealing,
};
use crate::db::Writer;
use crate::error::{Error, Result, check_name};
use crate::registry::{ToolType, guard};
use crate::secrets::Keyring;

/// A connector; `headers` lists the names only.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectorView {
    pub name: String,
    /// `http` (an HTTP API) or `mcp` (an MCP server over Streamable HTTP).
    pub kind: String,
    pub url: String,
    /// `POST` or `PUT`.
    pub method: String,
    /// Header names; values are never shown.
    pub headers: Vec<String>,
    pub timeout_ms: i32,
    /// `true`: a sync applies the server's new and changed tools at once; `false`:
    /// it holds them as pending changes for an operator (`docs/contracts.md`).
    pub trusted: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<connectors::Model> for ConnectorView {
    fn from(c: connectors::Model) -> Self {
        let headers = c
            .headers
            .as_object()
            .map(|h| h.keys().cloned().collect())
            .unwrap_or_default();
        Self {
            name: c.name,
            kind: c.kind,
            url: c.url,
            method: c.method,
            headers,
            timeout_ms: c.timeout_ms,
            trusted: c.trusted,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// Live connectors by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectorList {
    pub connectors: Vec<ConnectorView>,
}

/// The body of `POST /v1/connectors`. Its `Debug` shows header names, never values.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConnector {
    pub name: String,
    /// `http` (default) or `mcp`.
    #[serde(default = "http")]
    #[schema(value_type = Kind)]
    pub kind: String,
    /// `https://` (or `http://`); every address it names or resolves to must be
    /// globally routable unless allowed by `--connector-allow`.
    pub url: String,
    /// `POST` (default) or `PUT`.
    #[serde(default = "post")]
    pub method: String,
    /// Sent with every call; values are write-only, and sealed at rest (a server
    /// without a secrets key refuses them with 422 `secrets_key_missing`).
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub headers: Map<String, Value>,
    /// 1 to 30000 (the cap on every call); 30000 when absent.
    #[serde(default = "thirty_seconds")]
    pub timeout_ms: i32,
    /// Apply the server's new and changed tools at once on sync (`false`, the
    /// default: hold them for an operator).
    #[serde(default)]
    pub trusted: bool,
}

fn http() -> String {
    Kind::Http.as_str().to_owned()
}

fn post() -> String {
    "POST".to_owned()
}

fn thirty_seconds() -> i32 {
    30_000
}

/// The fields of `PATCH /v1/connectors/{connector}`. Its `Debug` shows header
/// names, never values.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorUpdate {
    pub url: Option<String>,
    pub method: Option<String>,
    /// Replaces every header. When `url` moves the connector to another scheme,
    /// host or port and this is absent, every header is dropped.
    #[schema(value_type = Option<std::collections::BTreeMap<String, String>>)]
    pub headers: Option<Map<String, Value>>,
    pub timeout_ms: Option<i32>,
    /// Apply the server's new and changed tools at once on sync, or hold them.
    pub trusted: Option<bool>,
}

/// Header names only: values are secrets.
fn names(headers: &Map<String, Value>) -> Vec<&str> {
    headers.keys().map(String::as_str).collect()
}

impl std::fmt::Debug for NewConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewConnector")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &names(&self.headers))
            .field("timeout_ms", &self.timeout_ms)
            .field("trusted", &self.trusted)
            .finish()
    }
}

impl std::fmt::Debug for ConnectorUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorUpdate")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &self.headers.as_ref().map(names))
            .field("timeout_ms", &self.timeout_ms)
            .field("trusted", &self.trusted)
            .finish()
    }
}

/// The body of `PUT /v1/tools/{tool}/connector`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// A connector name, or `null` to disconnect the tool.
    pub connector: Option<String>,
}

/// A tool's binding as set.
#[derive(Debug, Serialize, ToSchema)]
pub struct BindingView {
    pub tool: String,
    pub connector: Option<String>,
}

/// The live connector of that name; 404 otherwise.
pub async fn live(db: &impl ConnectionTrait, name: &str) -> Result<connectors::Model> {
    row(db, name).await
}

pub fn check_kind(kind: &str) -> Result<Kind> {
    kind.parse().map_err(|_| {
        Error::refused(
            "invalid_kind",
            format!("kind must be one of {}", Kind::NAMES.join(", ")),
        )
    })
}

async fn row(db: &impl ConnectionTrait, name: &str) -> Result<connectors::Model> {
    check_name("connector", name)?;
    connectors::Entity::find()
        .filter(connectors::Column::Name.eq(name))
        .filter(connectors::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no connector named {name:?}")))
}

pub fn check_method(method: &str) -> Result<()> {
    match method {
        "POST" | "PUT" => Ok(()),
        _ => Err(Error::refused(
            "invalid_method",
            "method must be POST or PUT",
        )),
    }
}

pub fn check_timeout(ms: i32) -> Result<()> {
    let cap = crate::execute::executors::EXECUTION_TIMEOUT.as_millis();
    match u128::try_from(ms) {
        Ok(ms) if (1..=cap).contains(&ms) => Ok(()),
        _ => Err(Error::refused(
            "invalid_timeout",
            format!("timeout_ms must be 1 to {cap} (no call may run longer)"),
        )),
    }
}

pub fn check_headers(headers: &Map<String, Value>) -> Result<()> {
    for (name, value) in headers {
        if reserved(name) {
            return Err(Error::refused(
                "reserved_header",
                format!(
                    "header {name:?} is set by loadout and may not be configured: {}, and loadout-*",
                    RESERVED_HEADERS.join(", ")
                ),
            ));
        }
        let ok_name = hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
        let ok_value = value
            .as_str()
            .is_some_and(|v| hyper::header::HeaderValue::from_str(v).is_ok());
        if !ok_name || !ok_value {
            return Err(Error::refused(
                "invalid_headers",
                format!("header {name:?} must be a valid name with a string value"),
            ));
        }
    }
    Ok(())
}

/// An `mcp` connector may not set the headers its transport sets on every request
/// (an `http` connector may: `Accept` is an ordinary header there).
pub fn check_transport_headers(kind: Kind, headers: &Map<String, Value>) -> Result<()> {
    let transport = mcp::TRANSPORT_HEADERS;
    let taken = headers
        .keys()
        .find(|name| transport.contains(&name.to_ascii_lowercase().as_str()));
    match (kind, taken) {
        (Kind::Mcp, Some(name)) => Err(Error::refused(
            "reserved_header",
            format!(
                "header {name:?} is set by the MCP transport and may not be configured on an mcp connector: {}",
                transport.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// Checks a URL a connector is given as the calls will: before the write, since it
/// may resolve a host name (no write lock is held across a lookup).
pub async fn check_url(outbound: &Outbound, url: &str) -> Result<()> {
    outbound
        .check_url(url)
        .await
        .map(drop)
        .map_err(|e| Error::refused("url_refused", e.to_string()))
}

pub async fn list(db: &DatabaseConnection) -> Result<ConnectorList> {
    let rows = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .order_by_asc(connectors::Column::Name)
        .all(db)
        .await?;
    Ok(ConnectorList {
        connectors: rows.into_iter().map(ConnectorView::from).collect(),
    })
}

/// Each live tool's connector, by tool name (tools without one are absent).
pub async fn bindings(
    db: &DatabaseConnection,
) -> Result<std::collections::BTreeMap<String, String>> {
    let live = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let names: std::collections::HashMap<i32, String> =
        live.into_iter().map(|c| (c.id, c.name)).collect();
    let bound = tools::Entity::find()
        .filter(tools::Column::DeletedAt.is_null())
        .filter(tools::Column::ConnectorId.is_not_null())
        .all(db)
        .await?;
    Ok(bound
        .into_iter()
        .filter_map(|t| {
            let connector = names.get(&t.connector_id?)?.clone();
            Some((t.name, connector))
        })
        .collect())
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<ConnectorView> {
    Ok(row(db, name).await?.into())
}

/// A change to a stored connector: what `PATCH /v1/connectors/{connector}` gives,
/// or a configuration file's whole connector.
#[derive(Default)]
pub struct Change {
    pub kind: Option<String>,
    pub url: Option<String>,
    pub method: Option<String>,
    pub timeout_ms: Option<i32>,
    pub trusted: Option<bool>,
    /// New header values, sealed on write, replacing every header but `keep`'s.
    /// `None` with nothing to keep: the stored headers stay, or are all dropped when
    /// `url` moves the connector to another scheme, host or port.
    pub headers: Option<Map<String, Value>>,
    /// Headers whose stored values stay as they are (a configuration file's `env`
    /// headers): refused when the connector moves, or when no value is stored.
    pub keep: Vec<String>,
}

impl From<ConnectorUpdate> for Change {
    fn from(update: ConnectorUpdate) -> Self {
        Self {
            kind: None,
            url: update.url,
            method: update.method,
            timeout_ms: update.timeout_ms,
            trusted: update.trusted,
            headers: update.headers,
            keep: Vec::new(),
        }
    }
}

/// The rules on header values given in a write: valid, not reserved, not the
/// transport's, and sealable.
fn check_given_headers(kind: Kind, headers: &Map<String, Value>, secrets: &Keyring) -> Result<()> {
    check_headers(headers)?;
    check_transport_headers(kind, headers)?;
    if !headers.is_empty() && secrets.sealing().is_none() {
        return Err(sealing::no_key());
    }
    Ok(())
}

/// Creates a connector inside an open registry write (its URL checked before,
/// with [`check_url`]).
pub async fn create_in(
    write: &guard::Write,
    secrets: &Keyring,
    new: NewConnector,
) -> Result<connectors::Model> {
    write.covers_registry()?;
    check_name("connector", &new.name)?;
    let kind = check_kind(&new.kind)?;
    check_method(&new.method)?;
    check_timeout(new.timeout_ms)?;
    check_given_headers(kind, &new.headers, secrets)?;
    let now = write.now();
    let name = new.name.clone();
    // Inserted without headers first: sealed values are bound to the row's id.
    let saved = connectors::ActiveModel {
        name: Set(new.name),
        kind: Set(kind.as_str().to_owned()),
        url: Set(new.url),
        method: Set(new.method),
        headers: Set(Value::Object(Map::new())),
        timeout_ms: Set(new.timeout_ms),
        trusted: Set(new.trusted),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&**write)
    .await
    .map_err(|e| {
        Error::from_db(e, || {
            format!("a connector named {name:?} exists (or existed: names of deleted connectors stay taken)")
        })
    })?;
    if new.headers.is_empty() {
        return Ok(saved);
    }
    let headers = sealing::seal(secrets, saved.id, new.headers)?;
    let mut active: connectors::ActiveModel = saved.into();
    active.headers = Set(headers);
    Ok(active.update(&**write).await?)
}

/// The headers a change leaves stored: `None` when they stay as they are.
fn headers_after(
    found: &connectors::Model,
    change: &mut Change,
    moved: bool,
    secrets: &Keyring,
) -> Result<Option<Value>> {
    if moved && !change.keep.is_empty() {
        return Err(Error::refused(
            "headers_need_values",
            format!(
                "connector {} moves to another host: its stored header values are never sent there; give {} a value with the move",
                found.name,
                change.keep.join(", ")
            ),
        ));
    }
    let Some(given) = change.headers.take() else {
        return Ok(match moved {
            true => Some(Value::Object(Map::new())),
            false => None,
        });
    };
    let stored: std::collections::HashMap<String, String> =
        sealing::stored(found).into_iter().collect();
    let mut headers = Map::new();
    for name in &change.keep {
        let held = stored.get(name).ok_or_else(|| {
            Error::refused(
                "header_value_missing",
                format!(
                    "connector {}: header {name} has no stored value to keep; give it a value",
                    found.name
                ),
            )
        })?;
        headers.insert(name.clone(), Value::String(held.clone()));
    }
    if !given.is_empty()
        && let Value::Object(sealed) = sealing::seal(secrets, found.id, given)?
    {
        headers.extend(sealed);
    }
    Ok(Some(Value::Object(headers)))
}

/// Changes a live connector inside an open registry write (a new URL checked
/// before, with [`check_url`]). A new scheme, host or port drops the header values
/// unless the change gives headers too: credentials meant for one server never go
/// to another because only its URL was changed.
pub async fn update_in(
    write: &guard::Write,
    secrets: &Keyring,
    name: &str,
    mut change: Change,
) -> Result<connectors::Model> {
    write.covers_registry()?;
    if let Some(method) = &change.method {
        check_method(method)?;
    }
    if let Some(ms) = change.timeout_ms {
        check_timeout(ms)?;
    }
    let found = row(&**write, name).await?;
    let kind = match &change.kind {
        Some(kind) => check_kind(kind)?,
        None => found.kind.parse().unwrap_or(Kind::Http),
    };
    if let Some(given) = &change.headers {
        check_given_headers(kind, given, secrets)?;
    }
    let moved = change
        .url
        .as_deref()
        .is_some_and(|url| !same_origin(&found.url, url));
    let headers = headers_after(&found, &mut change, moved, secrets)?;
    let mut active: connectors::ActiveModel = found.into();
    if change.kind.is_some() {
        active.kind = Set(kind.as_str().to_owned());
    }
    if let Some(url) = change.url {
        active.url = Set(url);
    }
    if let Some(method) = change.method {
        active.method = Set(method);
    }
    if let Some(headers) = headers {
        active.headers = Set(headers);
    }
    if let Some(ms) = change.timeout_ms {
        active.timeout_ms = Set(ms);
    }
    if let Some(trusted) = change.trusted {
        active.trusted = Set(trusted);
    }
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Soft-deletes a live connector inside an open registry write; its tools become
/// not connected, and its header values are erased (a deleted connector keeps no
/// credentials).
pub async fn delete_in(write: &guard::Write, name: &str) -> Result<connectors::Model> {
    write.covers_registry()?;
    let found = row(&**write, name).await?;
    let now = write.now();
    let mut active: connectors::ActiveModel = found.into();
    active.headers = Set(Value::Object(Map::new()));
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(&**write).await?)
}

/// Binds an `api` tool to an `http` connector or an `mcp` tool to an `mcp` one, or
/// disconnects it (`None`), inside an open registry write.
pub async fn bind_in(
    write: &guard::Write,
    tool: &str,
    connector: Option<&str>,
) -> Result<tools::Model> {
    write.covers_registry()?;
    check_name("tool", tool)?;
    let found = tools::Entity::find()
        .filter(tools::Column::Name.eq(tool))
        .filter(tools::Column::DeletedAt.is_null())
        .one(&**write)
        .await?
        .ok_or_else(|| Error::not_found(format!("no tool named {tool:?}")))?;
    let tool_type = found.tool_type.parse::<ToolType>();
    if !matches!(tool_type, Ok(ToolType::Api | ToolType::Mcp)) {
        return Err(Error::refused(
            "not_an_api_tool",
            format!(
                "{tool} is a {} tool; only api and mcp tools take a connector",
                found.tool_type
            ),
        ));
    }
    let connector_id = match connector {
        Some(name) => {
            let connector = row(&**write, name).await?;
            let kind = connector.kind.parse::<Kind>().map(Kind::tool_type);
            if kind != tool_type {
                return Err(Error::refused(
                    "connector_kind_mismatch",
                    format!(
                        "{name} is an {} connector; an {} tool needs {}",
                        connector.kind,
                        found.tool_type,
                        match tool_type {
                            Ok(ToolType::Mcp) => "an mcp connector",
                            _ => "an http connector",
                        }
                    ),
                ));
            }
            Some(connector.id)
        }
        None => None,
    };
    let mut active: tools::ActiveModel = found.into();
    active.connector_id = Set(connector_id);
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

pub async fn create(
    w: &Writer<'_>,
    outbound: &Outbound,
    secrets: &Keyring,
    new: NewConnector,
) -> Result<ConnectorView> {
    check_name("connector", &new.name)?;
    let kind = check_kind(&new.kind)?;
    check_method(&new.method)?;
    check_timeout(new.timeout_ms)?;
    check_given_headers(kind, &new.headers, secrets)?;
    check_url(outbound, &new.url).await?;
    let write = w.begin().await?;
    let saved = create_in(&write, secrets, new).await?;
    w.commit(write).await?;
    Ok(saved.into())
}

/// Changes what `update` gives (see [`update_in`]).
pub async fn update(
    w: &Writer<'_>,
    outbound: &Outbound,
    secrets: &Keyring,
    name: &str,
    update: ConnectorUpdate,
) -> Result<ConnectorView> {
    if let Some(method) = &update.method {
        check_method(method)?;
    }
    if let Some(ms) = update.timeout_ms {
        check_timeout(ms)?;
    }
    if let Some(headers) = &update.headers {
        check_headers(headers)?;
        if !headers.is_empty() && secrets.sealing().is_none() {
            return Err(sealing::no_key());
        }
    }
    if let Some(url) = &update.url {
        check_url(outbound, url).await?;
    }
    let write = w.begin().await?;
    let saved = update_in(&write, secrets, name, update.into()).await?;
    w.commit(write).await?;
    Ok(saved.into())
}

/// Soft delete (see [`delete_in`]).
pub async fn delete(w: &Writer<'_>, name: &str) -> Result<ConnectorView> {
    let write = w.begin().await?;
    let saved = delete_in(&write, name).await?;
    w.commit(write).await?;
    Ok(saved.into())
}

/// Binds a tool to a connector, or disconnects it (see [`bind_in`]).
pub async fn bind(w: &Writer<'_>, tool: &str, binding: Binding) -> Result<BindingView> {
    let write = w.begin().await?;
    bind_in(&write, tool, binding.connector.as_deref()).await?;
    w.commit(write).await?;
    Ok(BindingView {
        tool: tool.to_owned(),
        connector: binding.connector,
    })
}
