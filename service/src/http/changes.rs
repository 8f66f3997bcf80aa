//! The change stream: `GET /v1/changes`, Server-Sent Events telling a key that
//! what it fetches changed (`crate::changes` says what each event holds, where
//! its ids come from and what it costs).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, E400, E401, E403, E404};
use super::extract::{ApiQuery, reach};
use crate::app::AppState;
use crate::auth::Principal;
use crate::auth::keys::Role;
use crate::changes::{Scope, bounds::Full};
use crate::error::{Error, Kind, check_label};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream))
}

/// Which changes: one agent's (every agent the key reaches when absent), one
/// label's (every label when absent).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ChangesQuery {
    /// Only this agent's changes; an agent key scoped to one agent gets that
    /// agent's either way.
    agent: Option<String>,
    /// Only this label's label and rollout changes (`production`, …).
    label: Option<String>,
    /// A stream token (from an OFREP bulk answer's `eventStreams`), for a client
    /// that cannot send `Authorization`; it names the key and the agent.
    token: Option<String>,
}

#[utoipa::path(get, path = "/v1/changes", tag = "agents",
    summary = "A stream of what changes in what this key fetches (Server-Sent Events; agent, admin or operator key)",
    params(ChangesQuery, ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event received: what was missed since is sent first (or one `everything` event)")),
    responses((status = 200, content_type = "text/event-stream", body = String, description = "Events until the client goes, its key is revoked or the server stops; a comment every 15 s"), E400, E401, E403, E404))]
async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<ChangesQuery>,
) -> ApiResult<Response> {
    let (who, tokens_agent) = principal(&state, &headers, q.token.as_deref()).await?;
    if let Some(label) = &q.label {
        check_label(label)?;
    }
    let agent = agent_of(&who, q.agent, tokens_agent)?;
    if let Some(agent) = &agent {
        reach(&who, agent)?;
        crate::fetch::agent(&state.prompts(), agent).await?;
    }
    let slot = state.changes.bounds.reserve(who.tenant()).map_err(full)?;
    let scope = Scope {
        tenant: who.tenant().into(),
        agent: agent.map(String::into_boxed_str),
        label: q.label.map(String::into_boxed_str),
        key_id: who.key_id,
    };
    let last = last_event_id(&headers);
    let subscription = state.changes.subscribe(&state.db, &scope, last).await?;
    let frames = crate::changes::frames(state.changes.clone(), subscription, scope, slot);
    Ok((EVENT_STREAM, Body::from_stream(frames)).into_response())
}

/// A stream's headers: its type, no caching, no proxy buffering.
const EVENT_STREAM: [(header::HeaderName, HeaderValue); 3] = [
    (
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    ),
    (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    (
        header::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    ),
];

/// The agent a stream is about: the one asked for, the token's, or the scoped
/// key's; a token for one agent opens no other's (404, as for a key's scope).
fn agent_of(
    who: &Principal,
    asked: Option<String>,
    tokens: Option<String>,
) -> ApiResult<Option<String>> {
    match (asked, tokens) {
        (Some(asked), Some(scope)) if asked != scope => {
            Err(Error::not_found(format!("no agent named {asked:?}")))
        }
        (asked, scope) => Ok(asked.or(scope).or_else(|| who.agent.clone())),
    }
}

/// The key behind the request: its `Authorization` (an agent, admin or operator
/// key), else a stream token naming a key that is still live (and the agent it
/// scopes the stream to); 401 for neither.
async fn principal(
    state: &AppState,
    headers: &HeaderMap,
    token: Option<&str>,
) -> ApiResult<(Principal, Option<String>)> {
    let (who, agent) = match (headers.contains_key(header::AUTHORIZATION), token) {
        (false, Some(token)) => {
            let claims = crate::changes::token::read(&state.secrets, token, state.clock.now())
                .ok_or_else(Error::unauthorized)?;
            let who = crate::auth::keys::principal_by_id(&state.db, claims.key_id)
                .await?
                .ok_or_else(Error::unauthorized)?;
            (who, claims.agent)
        }
        _ => (
            crate::web::request::authenticate(headers, state).await?,
            None,
        ),
    };
    match who.role {
        Role::Agent | Role::Admin | Role::Operator => Ok((who, agent)),
        _ => Err(Error::forbidden("an agent, admin or operator key")),
    }
}

/// `Last-Event-ID` as an outbox id; one that is not a number is taken as 0, so the
/// client is told to fetch everything rather than left to miss something.
fn last_event_id(headers: &HeaderMap) -> Option<i64> {
    let value = headers.get("last-event-id")?.to_str().ok()?.trim();
    Some(value.parse::<i64>().unwrap_or(0).max(0))
}

#[derive(Serialize)]
struct Over {
    limit: usize,
    retry_after_seconds: u64,
}

/// 429 over either bound, with a `Retry-After`: streams end as clients go.
fn full(full: Full) -> ApiError {
    let (limit, message) = match full {
        Full::Tenant(most) => (
            most,
            format!(
                "this tenant's keys hold {most} change streams on this server, the most one tenant may (`--max-streams-per-tenant`)"
            ),
        ),
        Full::Process(most) => (
            most,
            format!("this server holds {most} change streams, its most (`--max-streams`)"),
        ),
    };
    let over = Over {
        limit,
        retry_after_seconds: 5,
    };
    Error::new(Kind::TooManyRequests, "too_many_streams", message).with_details(over)
}
