//! loadout as an MCP server (Streamable HTTP, rmcp's server) on the API's port:
//! `/mcp` for an agent-scoped key, `/mcp/agents/{agent}` for an unscoped one.
//!
//! [`gate`] runs before rmcp on every request: it refuses a browser `Origin` that
//! is not allow-listed (403), authenticates the Bearer key (401; agent or admin
//! role), resolves the agent (404 across scopes, as on REST) and the prompt's query
//! (`channel`, default `web`; `tz`; `user_id`), and puts the [`Caller`] in the
//! request's extensions, which rmcp hands to the handler with the request parts.
//! The handler then answers from the same domain functions as REST: the rendered
//! prompt as `instructions`, the agent's tools, tool calls through `call::call`
//! (validation, `auto` runs now, the rest become proposals), one prompt per
//! channel. Open sessions get `list_changed` when the configuration generation
//! moves (an admin edit here, or in another process within the poller's second).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListToolsResult, MetaObject,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, Role as MessageRole,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::extract::{authenticate, reach};
use crate::actions::call::{self, ToolCall};
use crate::actions::views::CallResult;
use crate::app::AppState;
use crate::auth::{Principal, Role};
use crate::error::{Error, Kind};
use crate::prompt::fetch::{self, RenderRequest};
use crate::registry::formats::ToolDef;

/// Who is calling, for which agent, and how its prompt is rendered.
#[derive(Clone, Debug)]
pub struct Caller {
    who: Principal,
    agent: String,
    channel: String,
    tz: Option<String>,
    user_id: Option<String>,
}

#[derive(Deserialize, Default)]
struct PromptQuery {
    channel: Option<String>,
    tz: Option<String>,
    user_id: Option<String>,
}

type Peers = Arc<Mutex<Vec<Peer<RoleServer>>>>;

/// `/mcp` and `/mcp/agents/{agent}`.
pub fn routes(state: &AppState) -> Router<AppState> {
    let peers: Peers = Arc::default();
    if tokio::runtime::Handle::try_current().is_ok() {
        spawn_notifier(state.clone(), Arc::downgrade(&peers));
    }
    let handler = Loadout {
        state: state.clone(),
        peers,
    };
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(state.mcp.allowed_hosts.iter().cloned())
        .with_sse_keep_alive(Some(Duration::from_secs(15)));
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state.clone(), gate))
}

/// Admits a request to the MCP server, or answers it in the API's error shape.
async fn gate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let (headers, uri) = (request.headers().clone(), request.uri().clone());
    match admit(&state, &headers, &uri).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

async fn admit(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
) -> Result<Caller, Error> {
    check_origin(state, headers)?;
    let who = authenticate(headers, state).await?;
    if !matches!(who.role, Role::Agent | Role::Admin) {
        return Err(Error::forbidden("an agent or admin key"));
    }
    let path = uri.path().trim_end_matches('/');
    let agent = match (path.strip_prefix("/mcp/agents/"), &who.agent) {
        (Some(agent), _) => {
            reach(&who, agent)?;
            agent.to_owned()
        }
        (None, Some(scope)) if path == "/mcp" => scope.clone(),
        (None, None) if path == "/mcp" => {
            return Err(Error::invalid(
                "this key reaches every agent: name one with /mcp/agents/{agent}",
            ));
        }
        _ => return Err(Error::not_found("no such route")),
    };
    fetch::agent(state, &agent).await?;
    let query = axum::extract::Query::<PromptQuery>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|_| Error::invalid("the query takes channel, tz and user_id"))?;
    Ok(Caller {
        who,
        agent,
        channel: query.channel.unwrap_or_else(|| "web".to_owned()),
        tz: query.tz,
        user_id: query.user_id,
    })
}

/// A request from a browser (it sends `Origin`) must come from an allowed origin.
fn check_origin(state: &AppState, headers: &axum::http::HeaderMap) -> Result<(), Error> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let allowed = origin
        .to_str()
        .is_ok_and(|o| state.mcp.allowed_origins.iter().any(|a| a == o));
    if allowed {
        return Ok(());
    }
    Err(Error::new(
        Kind::Forbidden,
        "origin_refused",
        "requests from this browser origin are refused; allow it with serve --mcp-allowed-origin",
    ))
}

/// Tells every open session that tools and prompts changed when the generation moves.
fn spawn_notifier(state: AppState, peers: Weak<Mutex<Vec<Peer<RoleServer>>>>) {
    tokio::spawn(async move {
        let mut seen = state.cache.generation();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Some(peers) = peers.upgrade() else { return };
            let now = state.cache.generation();
            if now == seen {
                continue;
            }
            seen = now;
            let open: Vec<Peer<RoleServer>> = match peers.lock() {
                Ok(mut list) => {
                    list.retain(|p| !p.is_transport_closed());
                    list.clone()
                }
                Err(_) => return,
            };
            for peer in open {
                peer.notify_tool_list_changed().await.ok();
                peer.notify_prompt_list_changed().await.ok();
            }
        }
    });
}

#[derive(Clone)]
struct Loadout {
    state: AppState,
    peers: Peers,
}

fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request was not admitted", None))
}

/// A domain error as MCP's: not found is invalid params, the rest internal.
fn protocol(error: Error) -> ErrorData {
    match error.kind {
        Kind::NotFound | Kind::Invalid | Kind::Refused => {
            ErrorData::invalid_params(error.message, None)
        }
        _ => ErrorData::internal_error(error.message, None),
    }
}

impl Loadout {
    async fn render(
        &self,
        caller: &Caller,
        channel: &str,
        notes: Vec<String>,
    ) -> Result<String, Error> {
        let agent = fetch::agent(&self.state, &caller.agent).await?;
        let request = RenderRequest {
            channel: Some(channel.to_owned()),
            user_id: caller.user_id.clone(),
            tz: caller.tz.clone(),
            memory_notes: notes,
            last_message_at: None,
            now: Some(self.state.clock.now()),
        };
        Ok(
            fetch::render(&self.state, caller.who.tenant(), &agent, request)
                .await?
                .text,
        )
    }
}

/// A loadout tool as MCP describes it: strict schema, hints from verb and tier,
/// the tier in `_meta`.
fn mcp_tool(tool: &ToolDef) -> Tool {
    let verb = tool.name.split('_').next().unwrap_or_default();
    let read_only = matches!(verb, "get" | "search");
    let hints = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(verb == "delete")
        .idempotent(matches!(verb, "get" | "search" | "set"));
    let schema = tool.parameters.as_object().cloned().unwrap_or_default();
    let mut meta = Map::new();
    meta.insert(
        "io.loadout/approval-tier".into(),
        tool.approval_tier.clone().into(),
    );
    let mut out = Tool::new(
        tool.name.clone(),
        tool.description.clone(),
        Arc::new(schema),
    )
    .with_annotations(hints);
    out.meta = Some(MetaObject(meta));
    out
}

/// What a proposed call answers (`structuredContent`).
#[derive(serde::Serialize)]
struct Proposed {
    status: crate::actions::views::WaitingStatus,
    proposal_id: i32,
    description: String,
}

/// A refused call, in the API's error shape.
#[derive(serde::Serialize)]
struct Refusal {
    error: RefusalBody,
}

#[derive(serde::Serialize)]
struct RefusalBody {
    code: &'static str,
    message: String,
    details: Value,
}

fn to_value(body: &impl serde::Serialize) -> Value {
    serde_json::to_value(body).unwrap_or(Value::Null)
}

/// A REST call result as a tool result.
fn call_result(result: CallResult) -> CallToolResult {
    match result {
        CallResult::Waiting {
            status,
            proposal_id,
            description,
            ..
        } => {
            let text = format!("Proposed for approval as proposal {proposal_id}: {description}");
            let body = Proposed {
                status,
                proposal_id,
                description,
            };
            let mut done = CallToolResult::structured(to_value(&body));
            done.content = vec![ContentBlock::text(text)];
            done
        }
        CallResult::Ran { result, .. } => {
            let result = result.unwrap_or(Value::Null);
            let failed = result.get("error").is_some() && result.get("retryable").is_some();
            let mut done = match failed {
                true => CallToolResult::structured_error(result.clone()),
                false => CallToolResult::structured(result.clone()),
            };
            done.content = vec![ContentBlock::text(result.to_string())];
            done
        }
    }
}

impl ServerHandler for Loadout {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("loadout", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let caller = caller(&context)?;
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        let text = self
            .render(&caller, &caller.channel, Vec::new())
            .await
            .map_err(protocol)?;
        if let Ok(mut peers) = self.peers.lock() {
            peers.push(context.peer.clone());
        }
        Ok(result.with_instructions(text))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        let agent = fetch::agent(&self.state, &caller.agent)
            .await
            .map_err(protocol)?;
        Ok(ListToolsResult::with_all_items(
            agent.tools.iter().map(mcp_tool).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context)?;
        let meta = |key: &str| {
            context
                .meta
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(|s| format!("mcp-{s}"));
        let call = ToolCall {
            tool: request.name.to_string(),
            arguments: Value::Object(request.arguments.unwrap_or_default()),
            conversation_id: meta("conversation_id")
                .or(session)
                .unwrap_or_else(|| "mcp".to_owned()),
            message_id: None,
            user_id: meta("user_id").or(caller.user_id.clone()),
            idempotency_key: None,
        };
        match call::call(&self.state, &caller.who, &caller.agent, call).await {
            Ok(result) => Ok(call_result(result).into()),
            Err(e) if e.kind == Kind::NotFound => Err(protocol(e)),
            Err(e) => {
                let body = to_value(&Refusal {
                    error: RefusalBody {
                        code: e.code,
                        message: e.message,
                        details: e.details,
                    },
                });
                let mut failed = CallToolResult::structured_error(body.clone());
                failed.content = vec![ContentBlock::text(body.to_string())];
                Ok(failed.into())
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        caller(&context)?;
        let channels = fetch::channels(&self.state).await.map_err(protocol)?;
        let argument = |name: &str, what: &str| {
            let mut a = PromptArgument::new(name);
            a.description = Some(what.to_owned());
            a.required = Some(false);
            a
        };
        let prompts = channels
            .names()
            .map(|name| {
                Prompt::new(
                    name,
                    Some(format!("The agent's system prompt for the {name} channel")),
                    Some(vec![
                        argument("user_id", "whose instructions to include"),
                        argument("tz", "IANA time zone for the current time"),
                        argument("memory_notes", "notes to remember, one per line"),
                    ]),
                )
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let mut caller = caller(&context)?;
        let args = request.arguments.unwrap_or_default();
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        if let Some(user) = text("user_id") {
            caller.user_id = Some(user);
        }
        if let Some(tz) = text("tz") {
            caller.tz = Some(tz);
        }
        let notes = text("memory_notes")
            .map(|n| {
                n.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let rendered = self
            .render(&caller, &request.name, notes)
            .await
            .map_err(protocol)?;
        let message = PromptMessage::new_text(MessageRole::User, rendered);
        Ok(GetPromptResult::new(vec![message]).into())
    }
}
