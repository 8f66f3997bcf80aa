//! The `mcp` connector: an MCP server over Streamable HTTP, reached with the
//! official SDK's client (`rmcp`) over loadout's one outbound client, so the address
//! check, the CA bundle and the pool are the same as for `http` connectors.
//!
//! Each call opens a session (`initialize`), sends one `tools/call` with the remote
//! tool's name, the arguments, and the idempotency key and call context in `_meta`,
//! and closes the session. `isError` is a failure that is not retried; transport
//! errors and timeouts are retryable.
//!
//! Every answer is bounded by [`MAX_RESPONSE_BYTES`] on both of the transport's
//! forms: a JSON body (`max_json_response_size`) and each SSE event
//! (`max_sse_event_size`; rmcp's default is 16 MiB). A sync reads at most
//! [`ListLimits`] of `tools/list`.

mod capped;

use std::collections::HashMap;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    MetaObject, PaginatedRequestParams, RequestMetaObject, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::NeverRetry;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use serde_json::{Map, Value};

use super::call::{Call, Outcome};
use super::outbound::Outbound;
use super::target::{Connector, MAX_RESPONSE_BYTES, reserved};
use crate::secrets::Secret;
use capped::Capped;

/// Headers the MCP transport sets itself; a connector may not set them either.
pub const TRANSPORT_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// The `_meta` key of the idempotency key (`proposal:attempt`).
pub const IDEMPOTENCY_KEY: &str = "io.loadout/idempotency-key";

type Session = RunningService<RoleClient, ClientConfig>;

/// An MCP server: where it is and what to send with every request.
pub struct Server<'a> {
    pub url: &'a str,
    /// Opened for this session only.
    pub headers: &'a [(String, Secret)],
    pub outbound: &'a Outbound,
}

/// Why talking to the server failed, in words without addresses or bodies.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("the connector's URL is refused: {0}")]
    Refused(String),
    #[error("the MCP server could not be reached")]
    Unreachable,
    #[error("the MCP server failed: {0}")]
    Failed(String),
    /// The server sent more than a bound allows; asking again gets the same.
    #[error("the MCP server sent too much: {0}")]
    TooMuch(String),
}

impl McpError {
    fn retryable(&self) -> bool {
        !matches!(self, McpError::Refused(_) | McpError::TooMuch(_))
    }
}

/// How much of a server's `tools/list` is read at most (`serve --connector-max-tools`,
/// `--connector-max-pages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListLimits {
    /// Tools, over every page.
    pub max_tools: usize,
    /// Pages (`nextCursor` followed).
    pub max_pages: usize,
}

/// Tools a sync reads unless configured: the largest public MCP servers publish a
/// few hundred, and a model is offered at most 128 at once (OpenAI's cap), so a
/// thousand leaves room without letting a server fill the registry.
pub const DEFAULT_MAX_TOOLS: usize = 1000;
/// Pages a sync follows unless configured: a thousand tools at 50 a page (the
/// servers that page at all page by 50 to 100). Each page is at most
/// [`MAX_RESPONSE_BYTES`], so a sync holds at most 20 MiB of `tools/list`.
pub const DEFAULT_MAX_PAGES: usize = 20;

impl Default for ListLimits {
    fn default() -> Self {
        Self {
            max_tools: DEFAULT_MAX_TOOLS,
            max_pages: DEFAULT_MAX_PAGES,
        }
    }
}

/// Opens a session: the URL checked, the configured headers sent with each request.
/// The client says afterwards whether an answer passed the cap.
async fn connect(server: &Server<'_>) -> Result<(Session, Capped), McpError> {
    let url = server
        .outbound
        .check_url(server.url)
        .await
        .map_err(|e| McpError::Refused(e.0))?;
    let mut headers = HashMap::new();
    for (name, value) in server.headers {
        if reserved(name) || TRANSPORT_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            continue;
        }
        let (Ok(name), Ok(mut value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value.expose()),
        ) else {
            continue;
        };
        // Kept out of the transport's Debug output.
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(headers)
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .max_sse_event_size(MAX_RESPONSE_BYTES)
        .reinit_on_expired_session(false);
    // A dropped stream is an answer lost: the attempt fails (retryably) at once
    // rather than reconnecting until the timeout; retry is the approver's decision.
    config.retry_config = std::sync::Arc::new(NeverRetry::default());
    let client = Capped::new(server.outbound.client().clone());
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    let me = Implementation::new("loadout", env!("CARGO_PKG_VERSION"));
    let session = ClientConfig::new(ClientCapabilities::default(), me)
        .serve(transport)
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "an MCP session could not be opened");
            if client.hit() {
                too_much()
            } else {
                McpError::Unreachable
            }
        })?;
    Ok((session, client))
}

/// The server's tools (`tools/list`, every page), within `limits`.
pub async fn list_tools(server: &Server<'_>, limits: ListLimits) -> Result<Vec<Tool>, McpError> {
    let (session, client) = connect(server).await?;
    let tools = list_pages(&session, &client, limits).await;
    session.cancel().await.ok();
    tools
}

async fn list_pages(
    session: &Session,
    client: &Capped,
    limits: ListLimits,
) -> Result<Vec<Tool>, McpError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..limits.max_pages {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = session
            .list_tools(Some(params))
            .await
            .map_err(|e| failed(e, client))?;
        tools.extend(page.tools);
        if tools.len() > limits.max_tools {
            return Err(McpError::TooMuch(format!(
                "its tools/list holds more than {} tools (--connector-max-tools)",
                limits.max_tools
            )));
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(McpError::TooMuch(format!(
        "its tools/list runs past {} pages (--connector-max-pages)",
        limits.max_pages
    )))
}

fn failed(error: ServiceError, client: &Capped) -> McpError {
    if let ServiceError::McpError(data) = &error {
        return McpError::Failed(data.message.to_string());
    }
    if client.hit() || over_cap(&error) {
        return too_much();
    }
    tracing::debug!(error = %error, "an MCP request failed");
    McpError::Unreachable
}

fn too_much() -> McpError {
    McpError::TooMuch(format!(
        "an answer over the connector cap of {} KiB",
        MAX_RESPONSE_BYTES / 1024
    ))
}

/// Whether the transport stopped reading a JSON answer at [`MAX_RESPONSE_BYTES`].
fn over_cap(error: &ServiceError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if matches!(
            e.downcast_ref::<StreamableHttpError<reqwest::Error>>(),
            Some(StreamableHttpError::ResponseBodyTooLarge { .. })
        ) {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Runs one attempt as `tools/call` on the connector's server; `headers` are the
/// connector's, opened for this attempt.
pub async fn call(
    connector: &Connector,
    headers: &[(String, Secret)],
    outbound: &Outbound,
    call: &Call,
) -> Outcome {
    let server = Server {
        url: &connector.url,
        headers,
        outbound,
    };
    let (session, client) = match connect(&server).await {
        Ok(open) => open,
        Err(e) => return Outcome::failure(e.to_string(), e.retryable()),
    };
    if let Some(accepted) = &connector.accepted_schema
        && let Err(why) = still_accepted(&session, &client, &connector.remote_tool, accepted).await
    {
        session.cancel().await.ok();
        return why;
    }
    let mut params = CallToolRequestParams::new(connector.remote_tool.clone());
    let mut arguments = call.arguments.clone();
    if let Some(remote) = &connector.remote_schema {
        super::nulls::drop_nulls(&mut arguments, remote);
    }
    params.arguments = Some(match arguments {
        Value::Object(fields) => fields,
        _ => Map::new(),
    });
    params.meta = Some(RequestMetaObject(MetaObject(meta(call))));
    let answer = session.call_tool(params).await;
    session.cancel().await.ok();
    match answer {
        Ok(result) => outcome(result),
        Err(e) => {
            let e = failed(e, &client);
            Outcome::failure(e.to_string(), e.retryable())
        }
    }
}

/// Whether the server's `tools/list` still gives `remote` the input schema an
/// operator accepted; the failure to answer with otherwise (not retried: a retry
/// meets the same server until someone accepts its change).
async fn still_accepted(
    session: &Session,
    client: &Capped,
    remote: &str,
    accepted: &Value,
) -> Result<(), Outcome> {
    let tools = match list_pages(session, client, ListLimits::default()).await {
        Ok(tools) => tools,
        Err(e) => return Err(Outcome::failure(e.to_string(), e.retryable())),
    };
    let Some(tool) = tools.iter().find(|t| t.name == remote) else {
        return Err(Outcome::failure(
            format!("the server no longer lists {remote:?}; sync the connector"),
            false,
        ));
    };
    let sent = Value::Object((*tool.input_schema).clone());
    if crate::digest::sorted(&sent) != crate::digest::sorted(accepted) {
        return Err(Outcome::failure(
            format!(
                "the server's input schema of {remote:?} is not the one accepted; the call was not sent (sync the connector and accept or reject the change)"
            ),
            false,
        ));
    }
    Ok(())
}

/// The idempotency key and the call's context, as `_meta` entries.
fn meta(call: &Call) -> Map<String, Value> {
    let mut meta = Map::new();
    let mut put = |key: &str, value: Value| {
        meta.insert(format!("io.loadout/{key}"), value);
    };
    put("idempotency-key", call.idempotency_key.clone().into());
    put("tool", call.tool.clone().into());
    put("agent", call.agent.clone().into());
    put("tenant", call.tenant.clone().into());
    put("conversation-id", call.conversation_id.clone().into());
    put("proposal-id", call.proposal_id.into());
    put("attempt", call.attempt.into());
    if let Some(user) = &call.user_id {
        put("user-id", user.clone().into());
    }
    meta
}

/// `content`, `structuredContent` and `isError` as the proposal's result; `isError`
/// is a failure that is not retried.
fn outcome(result: CallToolResult) -> Outcome {
    let is_error = result.is_error.unwrap_or(false);
    let mut answer = Map::new();
    answer.insert(
        "content".into(),
        serde_json::to_value(&result.content).unwrap_or(Value::Null),
    );
    if let Some(structured) = result.structured_content {
        answer.insert("structuredContent".into(), structured);
    }
    answer.insert("isError".into(), is_error.into());
    if is_error {
        answer.insert("error".into(), "the MCP tool reported an error".into());
        answer.insert("retryable".into(), false.into());
    }
    Outcome {
        success: !is_error,
        result: Value::Object(answer),
    }
}
