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

use super::error::{ApiError, ApiResult, E400, E401, E403, E404, E429};
use super::extract::{AgentKey, ApiQuery, reach};
use crate::app::AppState;
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
}

#[utoipa::path(get, path = "/v1/changes", tag = "agents",
    summary = "A stream of what changes in what this key fetches (Server-Sent Events; agent, admin or operator key)",
    params(ChangesQuery, ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event received: what was missed since is sent first (or one `everything` event)")),
    responses((status = 200, content_type = "text/event-stream", body = String, description = "Events until the client goes, its key is revoked or the server stops; a comment every 15 s"), E400, E401, E403, E404, E429))]
async fn stream(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<ChangesQuery>,
) -> ApiResult<Response> {
    if let Some(label) = &q.label {
        check_label(label)?;
    }
    let agent = q.agent.or_else(|| who.agent.clone());
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
    let headers = [
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
    Ok((headers, Body::from_stream(frames)).into_response())
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
