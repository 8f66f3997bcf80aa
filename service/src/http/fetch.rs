//! What agents call: their prompt, their tools, or both in one round trip.
//! Any agent, admin or operator key may read; every response carries a strong `ETag` and
//! answers a matching `If-None-Match` with 304 and no body. A prompt with a user's
//! instructions is the caller's tenant's: the tenant comes from the key and is part
//! of every cached prompt's key. What is served is the revision `?label=` points at
//! (`production` when absent), named in the body and in `Loadout-Revision`; the
//! label is part of every cached response's key.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, E400, E401, E403, E404, E413, E422};
use super::extract::{AgentKey, ApiJson, ApiPath, ApiQuery, reach};
use crate::app::AppState;
use crate::error::check_id;
use crate::fetch::encoded::Encoded;
use crate::fetch::{self, LoadoutView, Pick, PromptView, RenderRequest, ToolsView};
use crate::registry::formats::Format;
use crate::releases::PRODUCTION;

/// The response header naming the revision served.
pub const LOADOUT_REVISION: &str = "loadout-revision";

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_prompt))
        .routes(routes!(render_prompt))
        .routes(routes!(get_tools))
        .routes(routes!(get_loadout))
}

/// The header a client sends with the `etag` of a change stream's event
/// (`"g57"`): the answer is read at that configuration generation or later.
pub const LOADOUT_GENERATION: &str = "loadout-generation";

/// The request's `If-None-Match` values, and nothing else of its headers (the
/// `HeaderMap` extractor would copy them all on every fetch). A request naming a
/// generation this replica has not heard of yet (`Loadout-Generation`) makes it
/// read the generation first, so an event heard on one replica is never answered
/// from another's older cache.
pub struct IfNoneMatch(Vec<HeaderValue>);

impl axum::extract::FromRequestParts<AppState> for IfNoneMatch {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let wanted = parts
            .headers
            .get(LOADOUT_GENERATION)
            .and_then(|v| v.to_str().ok())
            .and_then(crate::changes::frame::generation_of);
        if let Some(wanted) = wanted {
            state.at_least(wanted).await;
        }
        Ok(Self(
            parts
                .headers
                .get_all(header::IF_NONE_MATCH)
                .iter()
                .cloned()
                .collect(),
        ))
    }
}

impl IfNoneMatch {
    /// The `If-None-Match` values of `headers` (the OFREP routes take the map whole).
    pub fn of(headers: &axum::http::HeaderMap) -> Self {
        Self(
            headers
                .get_all(header::IF_NONE_MATCH)
                .iter()
                .cloned()
                .collect(),
        )
    }
}

/// 200 with the body, or 304 when `If-None-Match` holds its ETag (or `*`).
pub fn respond(encoded: Encoded, conditional: &IfNoneMatch) -> Response {
    let etag = encoded.etag.as_bytes();
    let matches = conditional
        .0
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .any(|tag| {
            let tag = tag.trim_ascii();
            tag == b"*" || tag == etag
        });
    let revision = encoded.revision;
    let mut response = if matches {
        (StatusCode::NOT_MODIFIED, [(header::ETAG, encoded.etag)]).into_response()
    } else {
        let json = HeaderValue::from_static("application/json");
        let no_cache = HeaderValue::from_static("no-cache");
        let headers = [
            (header::ETAG, encoded.etag),
            (header::CONTENT_TYPE, json),
            (header::CACHE_CONTROL, no_cache),
        ];
        (headers, encoded.body).into_response()
    };
    if let Some(revision) = revision {
        let name = header::HeaderName::from_static(LOADOUT_REVISION);
        response.headers_mut().insert(name, revision);
    }
    response
}

/// A view that names the revision it serves.
trait Revisioned: Serialize {
    fn revision(&self) -> i32;
}

impl Revisioned for PromptView {
    fn revision(&self) -> i32 {
        self.provenance.revision
    }
}

impl Revisioned for ToolsView {
    fn revision(&self) -> i32 {
        ToolsView::revision(self)
    }
}

impl Revisioned for LoadoutView {
    fn revision(&self) -> i32 {
        LoadoutView::revision(self)
    }
}

/// A view encoded once with its ETag and its revision.
fn encode(view: &impl Revisioned) -> ApiResult<Encoded> {
    Ok(Encoded::new(view)
        .map_err(ApiError::internal)?
        .with_revision(view.revision()))
}

/// Serves a GET from the response cache, or builds, encodes and caches it. `key`
/// must name everything the body depends on besides the configuration generation
/// (which stamps the entry) and the minute (part of the key, because the prompt
/// shows the current time to the minute). `None`: build every time, never cache.
///
/// Per-user prompts are not cached whole: each conversation has its own user, so
/// on a real load almost every one was built once and evicted unused (BENCHMARKS.md,
/// issue 12). Their one query, the user's instructions, is cached instead, so a
/// user's second fetch is a render and an encode, with no database.
async fn cached<T: Revisioned>(
    state: &AppState,
    headers: &IfNoneMatch,
    key: Option<String>,
    build: impl Future<Output = ApiResult<T>>,
) -> ApiResult<Response> {
    let generation = state.generation.current();
    if let Some(hit) = key
        .as_deref()
        .and_then(|k| state.responses.get(k, generation))
    {
        return Ok(respond(hit, headers));
    }
    let encoded = encode(&build.await?)?;
    if let Some(key) = key {
        state.responses.put(key, generation, encoded.clone());
    }
    Ok(respond(encoded, headers))
}

/// The subject a running rollout assigns by: the user, else the conversation
/// (each checked as an id). `None`: the base.
fn subject<'a>(user: Option<&'a str>, conversation: Option<&'a str>) -> ApiResult<Option<&'a str>> {
    if let Some(user) = user {
        check_id("user_id", user)?;
    }
    if let Some(conversation) = conversation {
        check_id("conversation_id", conversation)?;
    }
    Ok(user.or(conversation))
}

/// For a request with a subject, what the label serves it, picked before the
/// response cache is asked, and the cache key's part naming that revision: a
/// subject's answer is either side of a rollout, so the cached answer is keyed
/// by the revision picked, never by the subject (one subject's revision is never
/// another's). Without a subject, nothing (the base, keyed by the label alone).
async fn pick_first(
    state: &AppState,
    name: &str,
    label: &str,
    subject: Option<&str>,
) -> ApiResult<(Option<Pick>, String)> {
    let Some(subject) = subject else {
        return Ok((None, String::new()));
    };
    let pick = fetch::pick(&state.prompts(), name, label, Some(subject)).await?;
    let part = format!("\0#{}", pick.served.number);
    Ok((Some(pick), part))
}

/// The pick made before the cache was asked, or the base's.
async fn picked(state: &AppState, name: &str, label: &str, first: Option<Pick>) -> ApiResult<Pick> {
    match first {
        Some(pick) => Ok(pick),
        None => Ok(fetch::pick(&state.prompts(), name, label, None).await?),
    }
}

/// The minute a render belongs to: part of a cached prompt's key.
fn minute(now: DateTime<Utc>) -> i64 {
    now.timestamp().div_euclid(60)
}

/// Which render: channel, user and time zone.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct PromptQuery {
    /// A channel name, e.g. `web` (a missing one is 400 listing the known ones).
    #[param(required = true)]
    channel: Option<String>,
    /// Brings the user's instructions into the prompt; the subject a running
    /// rollout assigns by.
    user_id: Option<String>,
    /// The subject a running rollout assigns by when there is no `user_id`.
    conversation_id: Option<String>,
    /// IANA time zone for `$current_time`; UTC when absent.
    tz: Option<String>,
    /// The label whose revision to serve; `production` when absent.
    label: Option<String>,
}

impl PromptQuery {
    fn subject(&self) -> ApiResult<Option<&str>> {
        subject(self.user_id.as_deref(), self.conversation_id.as_deref())
    }

    /// A cached answer's key: `kind`, the agent, the caller's tenant (its users'
    /// instructions are in the body), the query (`\u{1}` marks an absent value),
    /// `format` if any, the minute and the revision part. Pushed into one string:
    /// `format!` twice cost a cached fetch 1,600 instructions.
    fn key(
        &self,
        kind: &str,
        name: &str,
        tenant: &str,
        format: &str,
        minute: i64,
        part: &str,
    ) -> String {
        fn part_of(v: &Option<String>) -> &str {
            v.as_deref().unwrap_or("\u{1}")
        }
        let minute = minute.to_le_bytes();
        let fields = [
            kind,
            name,
            format,
            tenant,
            part_of(&self.channel),
            part_of(&self.user_id),
            part_of(&self.tz),
            self.label(),
        ];
        let mut key = String::with_capacity(
            fields.iter().map(|f| f.len() + 1).sum::<usize>() + 24 + part.len(),
        );
        for field in fields {
            key.push_str(field);
            key.push('\0');
        }
        // The minute as its eight bytes in hex: no formatting machinery.
        for byte in minute {
            key.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            key.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        key.push_str(part);
        key
    }

    fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(PRODUCTION)
    }

    fn into_request(self, now: DateTime<Utc>) -> RenderRequest {
        RenderRequest {
            channel: self.channel,
            user_id: self.user_id,
            tz: self.tz,
            now: Some(now),
            ..Default::default()
        }
    }
}

/// Which wire format the tools come in, and which label's.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct FormatQuery {
    /// `openai` (default), `anthropic` or `mcp`.
    format: Option<Format>,
    /// The label whose revision to serve; `production` when absent.
    label: Option<String>,
    /// The subject a running rollout assigns by (send what the prompt was
    /// fetched with, to get the tools of the same revision).
    user_id: Option<String>,
    /// The subject when there is no `user_id`.
    conversation_id: Option<String>,
}

/// Which label's revision to render.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct LabelQuery {
    /// The label whose revision to serve; `production` when absent.
    label: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt", tag = "agents",
    summary = "The agent's rendered prompt for a channel (agent, admin or operator key; ETag)",
    params(("agent" = String, Path), PromptQuery, ("If-None-Match" = Option<String>, Header, description = "ETags of copies you hold (or `*`): 304 with no body when one is current")),
    responses((status = 200, body = PromptView, description = "The prompt", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), (status = 304, description = "Not modified: your copy is current", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), E400, E401, E403, E404, E422))]
async fn get_prompt(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    ApiPath(name): ApiPath<String>,
    headers: IfNoneMatch,
    ApiQuery(q): ApiQuery<PromptQuery>,
) -> ApiResult<Response> {
    reach(&who, &name)?;
    let now = state.clock.now();
    let tenant = who.tenant();
    let label = q.label().to_owned();
    let (first, part) = pick_first(&state, &name, &label, q.subject()?).await?;
    // The member is part of the key: a policy may hide tools (and their prompt
    // sections) from a principal.
    let member = who.member.as_str();
    let key = q.user_id.is_none().then(|| {
        let part = format!("{part}\0{member}");
        q.key("prompt", &name, tenant, "", minute(now), &part)
    });
    cached(&state, &headers, key, async {
        let pick = picked(&state, &name, &label, first).await?;
        let request = q.into_request(now);
        let viewer = fetch::Viewer {
            tenant,
            member,
            user: None,
        };
        fetch::render(&state.prompts(), viewer, &pick, &label, request).await
    })
    .await
}

#[utoipa::path(post, path = "/v1/agents/{agent}/prompt/render", tag = "agents",
    summary = "Render with memory notes and session data in the body (agent, admin or operator key; ETag)",
    params(("agent" = String, Path), LabelQuery, ("If-None-Match" = Option<String>, Header, description = "ETags of copies you hold (or `*`): 304 with no body when one is current")), request_body = RenderRequest,
    responses((status = 200, body = PromptView, description = "The prompt", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), (status = 304, description = "Not modified: your copy is current", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), E400, E401, E403, E404, E413, E422))]
async fn render_prompt(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    ApiPath(name): ApiPath<String>,
    headers: IfNoneMatch,
    ApiQuery(q): ApiQuery<LabelQuery>,
    ApiJson(request): ApiJson<RenderRequest>,
) -> ApiResult<Response> {
    reach(&who, &name)?;
    let label = q.label.as_deref().unwrap_or(PRODUCTION);
    let subject = subject(
        request.user_id.as_deref(),
        request.conversation_id.as_deref(),
    )?;
    let pick = fetch::pick(&state.prompts(), &name, label, subject).await?;
    let viewer = fetch::Viewer {
        tenant: who.tenant(),
        member: &who.member,
        user: None,
    };
    let body = fetch::render(&state.prompts(), viewer, &pick, label, request).await?;
    Ok(respond(encode(&body)?, &headers))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/tools", tag = "agents",
    summary = "The agent's active tools as OpenAI, Anthropic or MCP definitions (agent, admin or operator key; ETag)",
    params(("agent" = String, Path), FormatQuery, ("If-None-Match" = Option<String>, Header, description = "ETags of copies you hold (or `*`): 304 with no body when one is current")),
    responses((status = 200, body = ToolsView, description = "The tools, sorted by name", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), (status = 304, description = "Not modified: your copy is current", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), E400, E401, E403, E404))]
async fn get_tools(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    ApiPath(name): ApiPath<String>,
    headers: IfNoneMatch,
    ApiQuery(q): ApiQuery<FormatQuery>,
) -> ApiResult<Response> {
    reach(&who, &name)?;
    let format = q.format.unwrap_or(Format::Openai);
    let label = q.label.as_deref().unwrap_or(PRODUCTION);
    let subject = subject(q.user_id.as_deref(), q.conversation_id.as_deref())?;
    let (first, part) = pick_first(&state, &name, label, subject).await?;
    // A policy may hide tools from a principal: the key names the caller's member
    // (and, where the served revision can hide one, the user), never one list for all.
    let (tenant, member) = (who.tenant(), who.member.as_str());
    let user = first
        .as_ref()
        .filter(|p| p.served.policy.as_ref().is_some_and(|p| p.can_hide()))
        .and(q.user_id.as_deref())
        .unwrap_or("\u{1}");
    let key = Some(format!(
        "tools\0{name}\0{format}\0{label}{part}\0{tenant}\0{member}\0{user}"
    ));
    cached(&state, &headers, key, async {
        let pick = picked(&state, &name, label, first).await?;
        let viewer = fetch::Viewer {
            tenant,
            member,
            user: q.user_id.as_deref(),
        };
        let shown = fetch::visible(&state.prompts(), &pick, viewer).await?;
        Ok(fetch::tools(&pick, label, format, &shown))
    })
    .await
}

/// A loadout's query: the prompt's and the tools' parameters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct LoadoutQuery {
    /// A channel name, e.g. `web` (a missing one is 400 listing the known ones).
    #[param(required = true)]
    channel: Option<String>,
    /// Brings the user's instructions into the prompt; the subject a running
    /// rollout assigns by.
    user_id: Option<String>,
    /// The subject a running rollout assigns by when there is no `user_id`.
    conversation_id: Option<String>,
    /// IANA time zone for `$current_time`; UTC when absent.
    tz: Option<String>,
    /// `openai` (default), `anthropic` or `mcp`.
    format: Option<Format>,
    /// The label whose revision to serve; `production` when absent.
    label: Option<String>,
}

impl LoadoutQuery {
    fn split(self) -> (PromptQuery, Format) {
        let prompt = PromptQuery {
            channel: self.channel,
            user_id: self.user_id,
            conversation_id: self.conversation_id,
            tz: self.tz,
            label: self.label,
        };
        (prompt, self.format.unwrap_or(Format::Openai))
    }
}

#[utoipa::path(get, path = "/v1/agents/{agent}/loadout", tag = "agents",
    summary = "Prompt and tools in one response (agent, admin or operator key; ETag)",
    params(("agent" = String, Path), LoadoutQuery, ("If-None-Match" = Option<String>, Header, description = "ETags of copies you hold (or `*`): 304 with no body when one is current")),
    responses((status = 200, body = LoadoutView, description = "Prompt and tools", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), (status = 304, description = "Not modified: your copy is current", headers(("ETag" = String, description = "The body's strong ETag; send it back in If-None-Match"), ("Loadout-Revision" = i32, description = "The revision served (the label's, `production` when none was asked for)"))), E400, E401, E403, E404, E422))]
async fn get_loadout(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    ApiPath(name): ApiPath<String>,
    headers: IfNoneMatch,
    ApiQuery(q): ApiQuery<LoadoutQuery>,
) -> ApiResult<Response> {
    reach(&who, &name)?;
    let (prompt, format) = q.split();
    let now = state.clock.now();
    let tenant = who.tenant();
    let label = prompt.label().to_owned();
    let (first, part) = pick_first(&state, &name, &label, prompt.subject()?).await?;
    // The member is part of the key: a policy may hide tools from a principal.
    let member = who.member.as_str();
    let key = prompt.user_id.is_none().then(|| {
        let part = format!("{part}\0{member}");
        prompt.key(
            "loadout",
            &name,
            tenant,
            format.as_str(),
            minute(now),
            &part,
        )
    });
    cached(&state, &headers, key, async {
        let pick = picked(&state, &name, &label, first).await?;
        let request = prompt.into_request(now);
        let user = request.user_id.clone();
        let viewer = fetch::Viewer {
            tenant,
            member,
            user: user.as_deref(),
        };
        fetch::loadout(&state.prompts(), viewer, &pick, &label, request, format).await
    })
    .await
}
