//! loadout as an MCP server (Streamable HTTP, rmcp's server) on the API's port:
//! `/mcp` for an agent-scoped key, `/mcp/agents/{agent}` for an unscoped one.
//!
//! [`gate`] runs before rmcp on every request: it refuses a browser `Origin` that
//! is not allow-listed (403), authenticates the Bearer key (401; agent or admin
//! role), resolves the agent (404 across scopes, as on REST) and the prompt's query
//! (`channel`, default `web`; `tz`; `user_id`), and puts the [`Caller`] in the
//! request's extensions, which rmcp hands to the handler with the request parts.
//! The handler then answers from the same domain functions as REST, from the
//! revision `?label=` points at (`production` when absent): the rendered prompt as
//! `instructions`, the agent's tools, tool calls through `call::call` (validated
//! against that revision, or the one `_meta["loadout/revision"]` names; `auto`
//! runs now, the rest become proposals), one prompt per channel. Results that
//! carry served content name it in `_meta` (`loadout/revision`, `loadout/label`, and while the label's rollout runs
//! `loadout/rollout` and `loadout/side`; the subject is `_meta` `user_id`, else the
//! endpoint's `?user_id=`, else `_meta` `conversation_id`). Open sessions get `list_changed` when the configuration generation
//! moves (an admin edit here, or in another process within the poller's second).

mod sessions;

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::ServerHandler;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    ContentBlock, CreateTaskResult, DetailedTask, DiscoverResult, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult,
    Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult, ListToolsResult,
    MetaObject, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, Role as MessageRole,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Task, TaskPayload, TaskStatus, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use self::sessions::{Bounded, Full, PeerSlot, Sessions, Ticket};
use crate::actions::call::{self, ToolCall};
use crate::actions::views::{CallRan, CallResult, CallWaiting, WaitingStatus};
use crate::app::AppState;
use crate::auth::{Principal, Role};
use crate::error::{Error, Kind};
use crate::fetch::{self, Pick, RenderRequest};
use crate::registry::formats::{self, ToolDef};
use crate::releases::PRODUCTION;
use crate::releases::serve::Served;
use crate::releases::traffic::Side;
use crate::web::request::public;
use crate::web::request::{MAX_BODY_BYTES, authenticate, has_nul_escape, reach};

/// Who is calling, for which agent, and how its prompt is rendered.
#[derive(Clone, Debug)]
pub struct Caller {
    who: Principal,
    agent: String,
    channel: String,
    tz: Option<String>,
    user_id: Option<String>,
    /// Whose revision is served (`production` unless the endpoint names one).
    label: String,
    /// For an `initialize`: where its handler leaves the session's peer.
    peer: Option<PeerSlot>,
}

impl Caller {
    /// Whose sessions a new one counts against: the key's tenant and name.
    fn owner(&self) -> sessions::Owner {
        format!("{}/{}", self.who.tenant(), self.who.key_name).into()
    }
}

/// The largest `initialize` body: rmcp keeps the client's `initialize` parameters
/// for the session's life, and a client's name, version and capabilities fit in
/// a fraction of this.
pub const MAX_INITIALIZE_BYTES: usize = 8 * 1024;

/// What the gate's middleware holds: the state and the book of sessions.
#[derive(Clone)]
struct Gate {
    state: AppState,
    sessions: Arc<Sessions>,
}

#[derive(Deserialize, Default)]
struct PromptQuery {
    channel: Option<String>,
    tz: Option<String>,
    user_id: Option<String>,
    label: Option<String>,
}

/// `/mcp` and `/mcp/agents/{agent}`.
pub fn routes(state: &AppState) -> Router<AppState> {
    let sessions = Sessions::new(
        state.settings.mcp.max_sessions_per_key,
        state.settings.mcp.max_sessions_per_tenant,
        state.settings.mcp.max_sessions,
    );
    let (alive, gone) = tokio::sync::oneshot::channel();
    if tokio::runtime::Handle::try_current().is_ok() {
        spawn_notifier(state.generation.changes(), Arc::downgrade(&sessions), gone);
    }
    let handler = Loadout {
        state: state.clone(),
        changes: state.generation.changes(),
        _alive: Arc::new(alive),
    };
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(state.settings.mcp.allowed_hosts.iter().cloned())
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(Bounded::new(sessions.clone())),
        config,
    );
    let gate_state = Gate {
        state: state.clone(),
        sessions,
    };
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(gate_state, gate))
}

/// What an unscoped key on `/mcp` is told, in the body and in `WWW-Authenticate`
/// (MCP clients show neither a 400's body nor most bodies, but they do show a
/// refused authorization).
const NAME_AN_AGENT: &str = "this key reaches every agent: connect to /mcp/agents/{agent} (for example /mcp/agents/assistant), or use a key made for one agent (keys create --agent)";

/// Admits a request to the MCP server, or answers it in the API's error shape. An
/// `initialize` runs with a reserved session slot (refused when its key or the
/// process holds the most sessions allowed).
async fn gate(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let (headers, uri) = (request.headers().clone(), request.uri().clone());
    let closing = request.method() == axum::http::Method::DELETE;
    let in_session = headers.contains_key("mcp-session-id");
    let mut caller = match admit(&gate.state, &headers, &uri).await {
        Ok(caller) => caller,
        Err(e) => return refused(e),
    };
    let session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    if session.is_some_and(|id| gate.sessions.foreign(id, &caller.owner())) {
        return unknown_session();
    }
    let (mut request, ticket) = match opening(&gate, &caller, request).await {
        Ok(opening) => opening,
        Err(answer) => return answer,
    };
    caller.peer = ticket.as_ref().map(Ticket::peer_slot);
    request.extensions_mut().insert(caller);
    let response = match ticket {
        Some(ticket) => sessions::opening(ticket, next.run(request)).await,
        None => next.run(request).await,
    };
    answered(response, closing, in_session)
}

/// A refusal of the gate, in the API's error shape.
fn refused(e: Error) -> Response {
    match e {
        e if e.code == "agent_required" => {
            let mut response = e.into_response();
            let challenge = format!(
                r#"Bearer realm="loadout", error="insufficient_scope", error_description="{NAME_AN_AGENT}""#
            );
            if let Ok(value) = axum::http::HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
            response
        }
        e => e.into_response(),
    }
}

/// Only a sessionless POST may open a session: its body is read whole to see
/// whether it is an `initialize`, which is bounded in size and gets a slot.
async fn opening(
    gate: &Gate,
    caller: &Caller,
    request: Request,
) -> Result<(Request, Option<Ticket>), Response> {
    if request.method() != axum::http::Method::POST
        || request.headers().contains_key("mcp-session-id")
    {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let limit = format!("request bodies are limited to {MAX_BODY_BYTES} bytes");
        return Err(Error::too_large("payload_too_large", limit).into_response());
    };
    let initialize = serde_json::from_slice::<Peek>(&bytes).is_ok_and(|p| p.method == "initialize");
    let request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
    if !initialize {
        return Ok((request, None));
    }
    if bytes.len() > MAX_INITIALIZE_BYTES {
        let limit = format!("an initialize request is limited to {MAX_INITIALIZE_BYTES} bytes");
        return Err(Error::too_large("initialize_too_large", limit).into_response());
    }
    match gate
        .sessions
        .reserve(caller.owner(), caller.who.tenant().into())
    {
        Ok(ticket) => Ok((request, Some(ticket))),
        Err(full) => Err(sessions_full(full)),
    }
}

/// A JSON-RPC message's method, if it has one.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    method: String,
}

/// A new session over a cap: 429 when the key holds its most (its own sessions
/// are in the way), 503 when the process does (with the `Retry-After` every 503
/// gets). The API's error shape, before any MCP framing, like the gate's other
/// refusals.
fn sessions_full(full: Full) -> Response {
    match full {
        Full::Key(most) => {
            let message = format!(
                "this key holds {most} open MCP sessions, the most one key may: close one (DELETE with its Mcp-Session-Id) or let one expire (5 minutes idle) before opening another"
            );
            // No Retry-After: a slot frees when this key closes a session, not at a time.
            Error::new(Kind::TooManyRequests, "too_many_sessions", message).into_response()
        }
        Full::Tenant(most) => {
            let message = format!(
                "this tenant's keys hold {most} open MCP sessions, the most one tenant may (`--mcp-max-sessions-per-tenant`): close one or let one expire (5 minutes idle) before opening another"
            );
            Error::new(Kind::TooManyRequests, "too_many_sessions", message).into_response()
        }
        Full::Process(most) => {
            let message =
                format!("this server holds {most} open MCP sessions, its most; try again shortly");
            Error::new(Kind::Unavailable, "mcp_sessions_full", message).into_response()
        }
    }
}

/// rmcp's answer as clients expect it: an unknown session is a 404 in the API's
/// shape (a client initializes again on it), a session's closing DELETE 204, and
/// rmcp's own 500 (its text names the failure inside; rmcp logged it) REST's 500.
fn answered(mut response: Response, closing: bool, in_session: bool) -> Response {
    if response.status() == axum::http::StatusCode::INTERNAL_SERVER_ERROR {
        let body = crate::web::request::ErrorBody {
            error: crate::web::request::ErrorDetail {
                code: "internal".to_owned(),
                message: crate::web::request::INTERNAL_MESSAGE.to_owned(),
                details: Value::Null,
            },
        };
        return (response.status(), axum::Json(body)).into_response();
    }
    if in_session && response.status() == axum::http::StatusCode::NOT_FOUND {
        return unknown_session();
    }
    if closing && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
        response.headers_mut().remove(header::CONTENT_LENGTH);
    }
    response
}

/// An unknown session, and another key's: the same 404, so a key cannot tell
/// whether a session id it holds exists.
fn unknown_session() -> Response {
    Error::new(
        Kind::NotFound,
        "session_not_found",
        "this MCP session is unknown here (expired, closed, or opened on another replica): initialize a new one; behind a balancer, route by Mcp-Session-Id",
    )
    .into_response()
}

async fn admit(
    state: &AppState,
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
) -> Result<Caller, Error> {
    check_origin(state, headers)?;
    let who = authenticate(headers, state).await?;
    if !matches!(who.role, Role::Agent | Role::Admin | Role::Operator) {
        return Err(Error::forbidden("an agent, admin or operator key"));
    }
    let path = uri.path().trim_end_matches('/');
    let agent = match (path.strip_prefix("/mcp/agents/"), &who.agent) {
        (Some(agent), _) => {
            reach(&who, agent)?;
            agent.to_owned()
        }
        (None, Some(scope)) if path == "/mcp" => scope.clone(),
        (None, None) if path == "/mcp" => {
            return Err(Error::new(Kind::Forbidden, "agent_required", NAME_AN_AGENT));
        }
        _ => return Err(Error::not_found("no such route")),
    };
    fetch::agent(&state.prompts(), &agent).await?;
    let query = axum::extract::Query::<PromptQuery>::try_from_uri(uri)
        .map(|q| q.0)
        .map_err(|_| Error::invalid("the query takes channel, tz, user_id and label"))?;
    Ok(Caller {
        who,
        agent,
        channel: query.channel.unwrap_or_else(|| "web".to_owned()),
        tz: query.tz,
        user_id: query.user_id,
        label: query.label.unwrap_or_else(|| PRODUCTION.to_owned()),
        peer: None,
    })
}

/// A request from a browser (it sends `Origin`) must come from an allowed origin.
fn check_origin(state: &AppState, headers: &axum::http::HeaderMap) -> Result<(), Error> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let allowed = origin
        .to_str()
        .is_ok_and(|o| state.settings.mcp.allowed_origins.iter().any(|a| a == o));
    if allowed {
        return Ok(());
    }
    Err(Error::new(
        Kind::Forbidden,
        "origin_refused",
        "requests from this browser origin are refused; allow it with serve --mcp-allowed-origin",
    ))
}

/// Tells every open session (2025-11-25) that tools and prompts changed when the
/// generation rises: pushed by [`crate::cache::Generation::changes`], never
/// polled (subscriptions (2026-07-28) watch the same channel). Ends when the last
/// handler goes (`gone`: the router and every session dropped) or the generation.
fn spawn_notifier(
    mut changes: watch::Receiver<i64>,
    sessions: Weak<Sessions>,
    mut gone: tokio::sync::oneshot::Receiver<()>,
) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = &mut gone => return,
            }
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            let open = sessions.peers();
            drop(sessions);
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
    /// The configuration generation, for `subscriptions/listen`.
    changes: watch::Receiver<i64>,
    /// Dropped with the last handler, which ends the notifier.
    _alive: Arc<tokio::sync::oneshot::Sender<()>>,
}

/// How long a client may keep `tools/list`, `prompts/list` and `server/discover`
/// answers: not at all. loadout's promise is that an edit shows on the next
/// fetch, many clients ignore `list_changed`, and answering again costs a cache
/// lookup.
const TTL_MS: u64 = 0;

/// Whom those answers may be shared with: the requesting user's client only.
/// `/mcp` answers a different agent for each scoped key, and the instructions
/// carry the tenant's user's own text.
const CACHE_SCOPE: CacheScope = CacheScope::Private;

fn caller(context: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| {
            protocol(Error::internal(
                "an MCP request reached the handler without the gate",
            ))
        })
}

/// Who is calling and what the endpoint's label serves, once the label and the
/// endpoint's channel (one of that revision's) are known to exist: an unknown
/// label or channel is -32602 on every request, whichever protocol revision it uses.
async fn admitted(
    state: &AppState,
    context: &RequestContext<RoleServer>,
) -> Result<(Caller, Pick), ErrorData> {
    let mut caller = caller(context)?;
    // `_meta["user_id"]` names the user for every request, as `tools/call` always
    // took it: `tools/list` and `prompts/get` hide what a policy hides from them.
    if let Some(user) = context.meta.get("user_id").and_then(Value::as_str) {
        crate::error::check_id("user_id", user).map_err(protocol)?;
        caller.user_id = Some(user.to_owned());
    }
    let pick = fetch::pick(
        &state.prompts(),
        &caller.agent,
        &caller.label,
        subject(context, &caller).as_deref(),
    )
    .await
    .map_err(protocol)?;
    let channels = &pick.served.channels;
    if channels.get(&caller.channel).is_err() {
        let known: Vec<&str> = channels.names().collect();
        let list = known.join(", ");
        return Err(ErrorData::invalid_params(
            format!(
                "unknown channel {:?} in the endpoint's ?channel=; known channels: {list}",
                caller.channel
            ),
            Some(Value::Object(
                [("known_channels".to_owned(), Value::from(known))]
                    .into_iter()
                    .collect(),
            )),
        ));
    }
    Ok((caller, pick))
}

/// The subject a running rollout assigns by: `_meta["user_id"]`, else the
/// endpoint's `?user_id=`, else `_meta["conversation_id"]`; `None`: the base.
fn subject(context: &RequestContext<RoleServer>, caller: &Caller) -> Option<String> {
    let meta = |key: &str| context.meta.get(key).and_then(Value::as_str);
    meta("user_id")
        .or(caller.user_id.as_deref())
        .or(meta("conversation_id"))
        .map(str::to_owned)
}

/// `_meta` of a result carrying served content: which revision, by which label,
/// and (while one runs) the label's rollout and the side served.
fn served_meta(caller: &Caller, pick: &Pick) -> Option<MetaObject> {
    let mut meta = serde_json::Map::new();
    meta.insert("loadout/revision".to_owned(), pick.served.number.into());
    meta.insert("loadout/label".to_owned(), caller.label.clone().into());
    if let Some(rollout) = pick.rollout {
        meta.insert("loadout/rollout".to_owned(), rollout.id.into());
        let side = match rollout.side {
            Side::Base => "base",
            Side::Candidate => "candidate",
        };
        meta.insert("loadout/side".to_owned(), side.into());
    }
    Some(MetaObject(meta))
}

/// A domain error as MCP's, in REST's public words ([`public`]): not found,
/// invalid and refused are invalid params, the rest internal; an internal error's
/// cause is logged once and never sent.
fn protocol(error: Error) -> ErrorData {
    match error.kind {
        Kind::NotFound | Kind::Invalid | Kind::Refused => {
            ErrorData::invalid_params(error.message, None)
        }
        _ => ErrorData::internal_error(public(error).message, None),
    }
}

/// What REST answers (400) for a NUL in a JSON string, which no text column can store.
const NUL_REFUSED: &str = "a JSON string holds \\u0000 (NUL), which no text column can store";

/// Refuses arguments holding a NUL anywhere (a key or a string), as REST refuses
/// a body that does: -32602 naming it.
fn refuse_nul(arguments: &serde_json::Map<String, Value>) -> Result<(), ErrorData> {
    let text = serde_json::to_vec(arguments).map_err(|e| protocol(Error::internal_from(e)))?;
    match has_nul_escape(&text) {
        true => Err(ErrorData::invalid_params(NUL_REFUSED, None)),
        false => Ok(()),
    }
}

impl Loadout {
    async fn render(
        &self,
        caller: &Caller,
        pick: &Pick,
        channel: &str,
        notes: Vec<String>,
    ) -> Result<String, Error> {
        let request = RenderRequest {
            channel: Some(channel.to_owned()),
            user_id: caller.user_id.clone(),
            conversation_id: None,
            tz: caller.tz.clone(),
            memory_notes: notes,
            last_message_at: None,
            now: Some(self.state.clock.now()),
        };
        let viewer = fetch::Viewer {
            tenant: caller.who.tenant(),
            member: &caller.who.member,
            user: caller.user_id.as_deref(),
        };
        let prompts = self.state.prompts();
        let view = fetch::render(&prompts, viewer, pick, &caller.label, request).await?;
        Ok(view.text)
    }
}

/// The revision a `tools/call` names in `_meta["loadout/revision"]` (a positive
/// integer), else the one the endpoint serves.
fn revision(context: &RequestContext<RoleServer>, served: &Served) -> Result<i32, ErrorData> {
    match context.meta.get("loadout/revision") {
        None => Ok(served.number),
        Some(n) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                ErrorData::invalid_params("_meta[\"loadout/revision\"] is a revision number", None)
            }),
    }
}

/// A loadout tool as MCP describes it: [`formats::mcp_tool`], the shape the REST
/// export gives, read into rmcp's type.
fn mcp_tool(tool: &ToolDef) -> Result<Tool, ErrorData> {
    serde_json::to_value(formats::mcp_tool(tool))
        .and_then(serde_json::from_value)
        .map_err(|e| protocol(Error::internal(format!("tool {}: {e}", tool.name))))
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

/// How a proposal's task is named: `proposal-42`.
const TASK_PREFIX: &str = "proposal-";

/// How often a client should poll a task for its decision.
const TASK_POLL_MS: u64 = 2_000;

fn task_id(proposal: i32) -> String {
    format!("{TASK_PREFIX}{proposal}")
}

/// The agent a proposal belongs to (`None`: no such proposal).
async fn proposal_agent(state: &AppState, id: i32) -> Option<i32> {
    use sea_orm::EntityTrait;
    entity::proposals::Entity::find_by_id(id)
        .one(&state.db)
        .await
        .ok()
        .flatten()
        .map(|p| p.agent_id)
}

/// A proposal as a task: `working` while it waits or runs; `completed` with the
/// tool's result once it ran (a failed run is a result with `isError`);
/// `failed` with a JSON-RPC error when it was declined or expired unrun.
fn detailed_task(id: &str, row: crate::actions::views::ProposalView) -> DetailedTask {
    use crate::actions::decide::State;
    let task = Task::new(
        id,
        TaskStatus::Working,
        row.created_at.to_rfc3339(),
        row.updated_at.to_rfc3339(),
    )
    .with_poll_interval_ms(TASK_POLL_MS);
    let state = row.state.parse::<State>().unwrap_or(State::Failed);
    let object = |value: Value| value.as_object().cloned().unwrap_or_default();
    let payload = match state {
        State::Proposed | State::Approved | State::Executing => TaskPayload::Working,
        State::Succeeded | State::Failed => {
            let ran = CallResult::Ran(CallRan {
                status: match state {
                    State::Succeeded => crate::actions::views::RanStatus::Succeeded,
                    _ => crate::actions::views::RanStatus::Failed,
                },
                proposal_id: row.id,
                result: row.result.clone(),
                decided_by: row.decided_by.clone(),
            });
            TaskPayload::Completed {
                result: object(serde_json::to_value(call_result(ran)).unwrap_or(Value::Null)),
            }
        }
        State::Declined | State::Expired => {
            let why = row
                .result
                .as_ref()
                .and_then(|r| r.get("error"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("the proposal was {}", row.state));
            let mut data = serde_json::Map::new();
            data.insert("state".to_owned(), Value::from(row.state.clone()));
            data.insert("proposal_id".to_owned(), Value::from(row.id));
            let mut error = serde_json::Map::new();
            error.insert("code".to_owned(), Value::from(-32000));
            error.insert("message".to_owned(), Value::from(why));
            error.insert("data".to_owned(), Value::Object(data));
            TaskPayload::Failed { error }
        }
    };
    DetailedTask::new(task, payload)
}

/// A REST call result as a tool result.
fn call_result(result: CallResult) -> CallToolResult {
    match result {
        CallResult::Waiting(CallWaiting {
            status,
            proposal_id,
            description,
            ..
        }) => {
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
        CallResult::Ran(CallRan { result, .. }) => {
            let result = result.unwrap_or(Value::Null);
            let failed = result.get("error").is_some() && result.get("retryable").is_some();
            let mut done = match failed {
                true => CallToolResult::structured_error(result.clone()),
                false => CallToolResult::structured(result.clone()),
            };
            done.content = vec![ContentBlock::text(result.to_string())];
            done
        }
        CallResult::DryRun(decision) => {
            let body = to_value(&decision);
            let mut done = CallToolResult::structured(body.clone());
            done.content = vec![ContentBlock::text(body.to_string())];
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
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("loadout", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let (caller, pick) = admitted(&self.state, &context).await?;
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        let text = self
            .render(&caller, &pick, &caller.channel, Vec::new())
            .await
            .map_err(protocol)?;
        if let Some(slot) = &caller.peer {
            // For list_changed; dropped with the session (sessions.rs).
            slot.set(context.peer.clone()).ok();
        }
        let mut result = result.with_instructions(text);
        result.meta = served_meta(&caller, &pick);
        Ok(result)
    }

    /// 2026-07-28's opening: the same instructions as `initialize`.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let (caller, pick) = admitted(&self.state, &context).await?;
        let text = self
            .render(&caller, &pick, &caller.channel, Vec::new())
            .await
            .map_err(protocol)?;
        let mut result = DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        )
        .with_ttl_ms(TTL_MS)
        .with_cache_scope(CACHE_SCOPE);
        result.instructions = Some(text);
        result.meta = served_meta(&caller, &pick);
        Ok(result)
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .build(),
        )
    }

    /// A 2026-07-28 subscription: `list_changed` for what it accepted each time
    /// the configuration generation moves, until the client goes or the router ends.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        admitted(&self.state, context.request_context()).await?;
        let mut changes = self.changes.clone();
        changes.mark_unchanged();
        let accepted = context.accepted().clone();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                moved = changes.changed() => {
                    if moved.is_err() {
                        return Ok(());
                    }
                    let sink = context.sink();
                    let sent = match (accepted.tools_list_changed, accepted.prompts_list_changed) {
                        (Some(true), Some(true)) => match sink.notify_tool_list_changed().await {
                            Ok(()) => sink.notify_prompt_list_changed().await,
                            Err(e) => Err(e),
                        },
                        (Some(true), _) => sink.notify_tool_list_changed().await,
                        (_, Some(true)) => sink.notify_prompt_list_changed().await,
                        _ => Ok(()),
                    };
                    if sent.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (caller, pick) = admitted(&self.state, &context).await?;
        let viewer = fetch::Viewer {
            tenant: caller.who.tenant(),
            member: &caller.who.member,
            user: caller.user_id.as_deref(),
        };
        let shown = fetch::visible(&self.state.prompts(), &pick, viewer)
            .await
            .map_err(protocol)?;
        let tools = shown.iter().map(mcp_tool).collect::<Result<_, _>>()?;
        let mut result = ListToolsResult::with_all_items(tools)
            .with_ttl_ms(TTL_MS)
            .with_cache_scope(CACHE_SCOPE);
        result.meta = served_meta(&caller, &pick);
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let (caller, pick) = admitted(&self.state, &context).await?;
        let arguments = request.arguments.unwrap_or_default();
        refuse_nul(&arguments)?;
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
            arguments: Value::Object(arguments),
            conversation_id: meta("conversation_id")
                .or(session)
                .unwrap_or_else(|| "mcp".to_owned()),
            message_id: None,
            user_id: meta("user_id").or(caller.user_id.clone()),
            // A retry of the same call with the same key answers the first call's result.
            idempotency_key: meta("idempotency_key"),
            // The revision the client names, else the one its endpoint serves.
            revision: Some(revision(&context, &pick.served)?),
            dry_run: false,
        };
        match call::call(
            &self.state.runner(),
            &self.state.prompts(),
            &self.state.validators,
            &self.state.settings.proposals,
            &caller.who,
            &caller.agent,
            call,
        )
        .await
        {
            // A client that declared tasks gets a proposal as a task, `working`
            // until an approver decides it (`tasks/get`).
            Ok(CallResult::Waiting(waiting))
                if waiting.status == WaitingStatus::ProposedForApproval && tasks =>
            {
                let now = self.state.clock.now().to_rfc3339();
                let task = Task::new(
                    task_id(waiting.proposal_id),
                    TaskStatus::Working,
                    &now,
                    &now,
                )
                .with_status_message(format!(
                    "proposed for approval as proposal {}: {}",
                    waiting.proposal_id, waiting.description
                ))
                .with_poll_interval_ms(TASK_POLL_MS);
                Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
            }
            Ok(result) => Ok(call_result(result).into()),
            Err(e) if e.kind == Kind::NotFound => Err(protocol(e)),
            Err(e) => {
                let e = public(e);
                let body = to_value(&Refusal {
                    error: RefusalBody {
                        code: e.code,
                        message: e.message,
                        details: *e.details,
                    },
                });
                let mut failed = CallToolResult::structured_error(body.clone());
                failed.content = vec![ContentBlock::text(body.to_string())];
                Ok(failed.into())
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let caller = caller(&context)?;
        let id = request
            .task_id
            .strip_prefix(TASK_PREFIX)
            .and_then(|n| n.parse::<i32>().ok())
            .ok_or_else(|| ErrorData::invalid_params("no such task", None))?;
        // The caller's tenant's proposal, of the endpoint's agent; anything else is not found.
        let detail = crate::actions::decide::get(&self.state.db, &caller.who, id)
            .await
            .map_err(protocol)?;
        let row = detail.proposal;
        let agent = crate::fetch::agent(&self.state.prompts(), &caller.agent)
            .await
            .map_err(protocol)?;
        if proposal_agent(&self.state, id).await != Some(agent.id) {
            return Err(ErrorData::invalid_params("no such task", None));
        }
        Ok(GetTaskResult::new(detailed_task(&request.task_id, row)))
    }

    async fn cancel_task(
        &self,
        _request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Err(ErrorData::invalid_request(
            "a proposal is decided by an approver; its caller cannot cancel it",
            None,
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let (_, pick) = admitted(&self.state, &context).await?;
        let channels = &pick.served.channels;
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
        Ok(ListPromptsResult::with_all_items(prompts)
            .with_ttl_ms(TTL_MS)
            .with_cache_scope(CACHE_SCOPE))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (mut caller, pick) = admitted(&self.state, &context).await?;
        let args = request.arguments.unwrap_or_default();
        refuse_nul(&args)?;
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
            .render(&caller, &pick, &request.name, notes)
            .await
            .map_err(protocol)?;
        let message = PromptMessage::new_text(MessageRole::User, rendered);
        let mut result = GetPromptResult::new(vec![message]);
        result.meta = served_meta(&caller, &pick);
        let model = crate::fetch::model_for(&pick, Some(&request.name));
        if let (Some(meta), Some(model)) = (result.meta.as_mut(), model) {
            let model = serde_json::to_value(model).unwrap_or(Value::Null);
            meta.0.insert("loadout/model".to_owned(), model);
        }
        Ok(result.into())
    }
}
