//! The `mcp` connector: an MCP server over Streamable HTTP, reached with the
//! official SDK's client (`rmcp`) over loadout's one outbound client, so the address
//! check, the CA bundle and the pool are the same as for `http` connectors.
//!
//! Each call opens a session (`initialize`), sends one `tools/call` with the remote
//! tool's name, the arguments, and the idempotency key and call context in `_meta`,
//! and closes the session. `isError` is a failure that is not retried; transport
//! errors and timeouts are retryable.

use std::collections::HashMap;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    MetaObject, RequestMetaObject, Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::NeverRetry;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};

use super::outbound::Outbound;
use super::target::{Connector, MAX_RESPONSE_BYTES, reserved};
use crate::actions::ledger::{Call, Outcome};

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
    pub headers: &'a [(String, String)],
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
}

impl McpError {
    fn retryable(&self) -> bool {
        !matches!(self, McpError::Refused(_))
    }
}

/// Opens a session: the URL checked, the configured headers sent with each request.
async fn connect(server: &Server<'_>) -> Result<Session, McpError> {
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
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) else {
            continue;
        };
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(headers)
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .reinit_on_expired_session(false);
    // A dropped stream is an answer lost: the attempt fails (retryably) at once
    // rather than reconnecting until the timeout; retry is the approver's decision.
    config.retry_config = std::sync::Arc::new(NeverRetry::default());
    let transport =
        StreamableHttpClientTransport::with_client(server.outbound.client().clone(), config);
    let me = Implementation::new("loadout", env!("CARGO_PKG_VERSION"));
    ClientConfig::new(ClientCapabilities::default(), me)
        .serve(transport)
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "an MCP session could not be opened");
            McpError::Unreachable
        })
}

/// The server's tools (`tools/list`, every page).
pub async fn list_tools(server: &Server<'_>) -> Result<Vec<Tool>, McpError> {
    let session = connect(server).await?;
    let tools = session.list_all_tools().await.map_err(failed);
    session.cancel().await.ok();
    tools
}

fn failed(error: ServiceError) -> McpError {
    match error {
        ServiceError::McpError(data) => McpError::Failed(data.message.to_string()),
        other => {
            tracing::debug!(error = %other, "an MCP request failed");
            McpError::Unreachable
        }
    }
}

/// Runs one attempt as `tools/call` on the connector's server.
pub async fn call(connector: &Connector, outbound: &Outbound, call: &Call) -> Outcome {
    let server = Server {
        url: &connector.url,
        headers: &connector.headers,
        outbound,
    };
    let session = match connect(&server).await {
        Ok(session) => session,
        Err(e) => return Outcome::failure(e.to_string(), e.retryable()),
    };
    let mut params = CallToolRequestParams::new(connector.remote_tool.clone());
    params.arguments = Some(call.arguments.as_object().cloned().unwrap_or_default());
    params.meta = Some(RequestMetaObject(MetaObject(meta(call))));
    let answer = session.call_tool(params).await;
    session.cancel().await.ok();
    match answer {
        Ok(result) => outcome(result),
        Err(e) => {
            let e = failed(e);
            Outcome::failure(e.to_string(), e.retryable())
        }
    }
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
