//! What agents call: their prompt, their tools, or both in one round trip.
//! Any valid key may read; every response carries a strong `ETag` and answers a
//! matching `If-None-Match` with 304 and no body.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::cache::LoadedAgent;
use super::error::{ApiError, ApiResult};
use super::extract::AgentKey;
use crate::app::AppState;
use crate::prompt::builder::{self, Channels};
use crate::prompt::load;
use crate::registry::formats::{self, Format};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_prompt))
        .routes(routes!(render_prompt))
        .routes(routes!(get_tools))
        .routes(routes!(get_loadout))
}

/// `[a-z0-9][a-z0-9._-]{0,63}`: agent, channel and key names.
pub fn check_name(what: &str, name: &str) -> ApiResult<()> {
    if crate::auth::keys::valid_name(name) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{what} name {name:?} is not valid: use 1 to 64 of a-z, 0-9, '-', '_' and '.'"
        )))
    }
}

/// A user id: 1 to 128 characters, no control characters.
pub fn check_user_id(user: &str) -> ApiResult<()> {
    if user.is_empty() || user.chars().count() > 128 || user.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "user_id must be 1 to 128 characters without control characters",
        ));
    }
    Ok(())
}

fn parse_tz(tz: Option<&str>) -> ApiResult<Tz> {
    match tz {
        None => Ok(Tz::UTC),
        Some(name) => name.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "unknown time zone {name:?}; use an IANA name such as Europe/Berlin"
            ))
        }),
    }
}

fn query<T>(query: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    query
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(format!("bad query string: {}", e.body_text())))
}

/// Parses a JSON body, mapping every failure to the one error shape (413 included).
pub fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "request bodies are limited to {} bytes",
                    super::MAX_BODY_BYTES
                ),
            )
        } else {
            ApiError::bad_request(e.body_text())
        }
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// The agent, from the cache or the database; 404 when there is no live agent of that name.
pub async fn agent(state: &AppState, name: &str) -> ApiResult<Arc<LoadedAgent>> {
    check_name("agent", name)?;
    let generation = state.cache.generation();
    let found = match state.cache.agent(name, generation) {
        Some(found) => found,
        None => {
            let found = load::agent_with_tool_defs(&state.db, name)
                .await?
                .map(|(id, agent, tools)| Arc::new(LoadedAgent { id, agent, tools }));
            state.cache.put_agent(name, generation, found.clone());
            found
        }
    };
    found.ok_or_else(|| ApiError::not_found(format!("no agent named {name:?}")))
}

pub async fn channels(state: &AppState) -> ApiResult<Arc<Channels>> {
    let generation = state.cache.generation();
    if let Some(channels) = state.cache.channels(generation) {
        return Ok(channels);
    }
    let channels = Arc::new(load::channels(&state.db).await?);
    state.cache.put_channels(generation, channels.clone());
    Ok(channels)
}

async fn instructions(state: &AppState, agent_id: i32, user: &str) -> ApiResult<Option<String>> {
    let generation = state.cache.generation();
    let found = match state.cache.instructions(agent_id, user, generation) {
        Some(found) => found,
        None => {
            let found: Option<Arc<str>> = load::user_instructions(&state.db, agent_id, user)
                .await?
                .map(Into::into);
            state
                .cache
                .put_instructions(agent_id, user, generation, found.clone());
            found
        }
    };
    Ok(found.map(|s| s.to_string()))
}

/// Everything a render takes besides the agent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderRequest {
    pub channel: String,
    #[serde(default)]
    pub user_id: Option<String>,
    #[serde(default)]
    pub tz: Option<String>,
    #[serde(default)]
    pub memory_notes: Vec<String>,
    #[serde(default)]
    pub last_message_at: Option<DateTime<Utc>>,
    /// Render as of this instant; the clock's now when absent. Never from a body.
    #[serde(skip)]
    pub now: Option<DateTime<Utc>>,
}

const MAX_MEMORY_NOTES: usize = 200;

/// Renders `agent`'s prompt; the JSON that the prompt endpoints return.
pub async fn render(
    state: &AppState,
    agent: &LoadedAgent,
    request: RenderRequest,
) -> ApiResult<Value> {
    check_name("channel", &request.channel)?;
    let tz = parse_tz(request.tz.as_deref())?;
    if let Some(user) = &request.user_id {
        check_user_id(user)?;
    }
    if request.memory_notes.len() > MAX_MEMORY_NOTES {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_MEMORY_NOTES} memory notes"
        )));
    }
    let channels = channels(state).await?;
    let channel = channels.get(&request.channel).map_err(|e| {
        ApiError::not_found(e.to_string()).with_details(json!({"known_channels": e.known}))
    })?;
    let user_instructions = match &request.user_id {
        Some(user) => instructions(state, agent.id, user).await?,
        None => None,
    };
    let context = builder::Context {
        now: request.now.unwrap_or_else(|| state.clock.now()),
        time_zone: tz,
        memory_notes: request.memory_notes,
        user_instructions,
        last_message_at: request.last_message_at,
    };
    let rendered =
        builder::build_agent_prompt(&agent.agent, channel, &context).map_err(ApiError::internal)?;
    Ok(json!({
        "agent": agent.agent.name,
        "text": rendered.text,
        "provenance": rendered.provenance,
    }))
}

/// A serialised JSON body and its strong ETag, ready to send (and to cache).
#[derive(Clone, Debug)]
pub struct Encoded {
    body: Bytes,
    etag: HeaderValue,
}

impl Encoded {
    pub fn new(body: &Value) -> ApiResult<Self> {
        let bytes = serde_json::to_vec(body).map_err(ApiError::internal)?;
        let digest = crate::auth::keys::hash_bytes(&bytes);
        let etag =
            HeaderValue::from_str(&format!("\"{}\"", &digest[..32])).map_err(ApiError::internal)?;
        Ok(Self {
            body: Bytes::from(bytes),
            etag,
        })
    }

    /// 200 with the body, or 304 when `If-None-Match` holds this ETag (or `*`).
    pub fn respond(self, headers: &HeaderMap) -> Response {
        let etag = self.etag.to_str().unwrap_or_default();
        let matches = headers
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|tag| {
                let tag = tag.trim();
                tag == "*" || tag == etag
            });
        if matches {
            return (StatusCode::NOT_MODIFIED, [(header::ETAG, self.etag)]).into_response();
        }
        (
            [
                (header::ETAG, self.etag),
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            ],
            self.body,
        )
            .into_response()
    }
}

/// A JSON response with a strong ETag, or 304 when the client already has it.
pub fn with_etag(headers: &HeaderMap, body: &Value) -> Response {
    match Encoded::new(body) {
        Ok(encoded) => encoded.respond(headers),
        Err(e) => e.into_response(),
    }
}

/// Serves a GET from the response cache, or builds, encodes and caches it. `key`
/// must name everything the body depends on besides the configuration generation
/// (which stamps the entry) and the minute (which is part of the key, because the
/// prompt shows the current time to the minute).
async fn cached(
    state: &AppState,
    headers: &HeaderMap,
    key: String,
    build: impl std::future::Future<Output = ApiResult<Value>>,
) -> ApiResult<Response> {
    let generation = state.cache.generation();
    if let Some(hit) = state.cache.response(&key, generation) {
        return Ok(hit.respond(headers));
    }
    let encoded = Encoded::new(&build.await?)?;
    state.cache.put_response(key, generation, encoded.clone());
    Ok(encoded.respond(headers))
}

/// The minute a render belongs to: part of a cached prompt's key.
fn minute(now: DateTime<Utc>) -> i64 {
    now.timestamp().div_euclid(60)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptQuery {
    channel: String,
    user_id: Option<String>,
    tz: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt", tag = "agents", summary = "The agent's rendered prompt for a channel (any key; ETag)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_prompt(
    State(state): State<AppState>,
    _key: AgentKey,
    Path(name): Path<String>,
    headers: HeaderMap,
    q: Result<Query<PromptQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let now = state.clock.now();
    let key = format!(
        "prompt\0{name}\0{}\0{}\0{}\0{}",
        q.channel,
        q.user_id.as_deref().unwrap_or("\u{1}"),
        q.tz.as_deref().unwrap_or("\u{1}"),
        minute(now)
    );
    cached(&state, &headers, key, async {
        let agent = agent(&state, &name).await?;
        render(
            &state,
            &agent,
            RenderRequest {
                channel: q.channel,
                user_id: q.user_id,
                tz: q.tz,
                now: Some(now),
                ..Default::default()
            },
        )
        .await
    })
    .await
}

#[utoipa::path(post, path = "/v1/agents/{agent}/prompt/render", tag = "agents", summary = "Render with memory notes and session data in the body (any key; ETag)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn render_prompt(
    State(state): State<AppState>,
    _key: AgentKey,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let request: RenderRequest = json_body(body)?;
    let agent = agent(&state, &name).await?;
    let body = render(&state, &agent, request).await?;
    Ok(with_etag(&headers, &body))
}

fn parse_format(format: Option<&str>) -> ApiResult<Format> {
    format
        .unwrap_or("openai")
        .parse()
        .map_err(|e: crate::closed::UnknownValue| ApiError::bad_request(e.to_string()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsQuery {
    format: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/tools", tag = "agents", summary = "The agent's active tools as OpenAI, Anthropic or MCP definitions (any key; ETag)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_tools(
    State(state): State<AppState>,
    _key: AgentKey,
    Path(name): Path<String>,
    headers: HeaderMap,
    q: Result<Query<ToolsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let format = parse_format(q.format.as_deref())?;
    let key = format!("tools\0{name}\0{format}");
    cached(&state, &headers, key, async {
        let agent = agent(&state, &name).await?;
        Ok(json!({
            "agent": agent.agent.name,
            "format": format,
            "tools": formats::render(&agent.tools, format),
        }))
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadoutQuery {
    channel: String,
    format: Option<String>,
    user_id: Option<String>,
    tz: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/loadout", tag = "agents", summary = "Prompt and tools in one response (any key; ETag)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_loadout(
    State(state): State<AppState>,
    _key: AgentKey,
    Path(name): Path<String>,
    headers: HeaderMap,
    q: Result<Query<LoadoutQuery>, QueryRejection>,
) -> ApiResult<Response> {
    let q = query(q)?;
    let format = parse_format(q.format.as_deref())?;
    let now = state.clock.now();
    let key = format!(
        "loadout\0{name}\0{}\0{format}\0{}\0{}\0{}",
        q.channel,
        q.user_id.as_deref().unwrap_or("\u{1}"),
        q.tz.as_deref().unwrap_or("\u{1}"),
        minute(now)
    );
    cached(&state, &headers, key, async {
        let agent = agent(&state, &name).await?;
        let prompt = render(
            &state,
            &agent,
            RenderRequest {
                channel: q.channel,
                user_id: q.user_id,
                tz: q.tz,
                now: Some(now),
                ..Default::default()
            },
        )
        .await?;
        Ok(json!({
            "agent": agent.agent.name,
            "prompt": {"text": prompt["text"], "provenance": prompt["provenance"]},
            "format": format,
            "tools": formats::render(&agent.tools, format),
        }))
    })
    .await
}
