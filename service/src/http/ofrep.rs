//! OpenFeature's remote evaluation protocol (OFREP 0.3), so that OpenFeature
//! providers read an agent's prompt, tools and model settings as flags
//! (`crate::fetch::ofrep` names the flags and says how each is evaluated):
//!
//! - `POST /ofrep/v1/evaluate/flags/{key}`: one flag;
//! - `POST /ofrep/v1/evaluate/flags`: every flag of the agents the key reaches,
//!   with a strong `ETag` (a matching `If-None-Match` is 304) and `eventStreams`
//!   naming the change stream (`GET /v1/changes`), whose events are OFREP's
//!   `refetchEvaluation`; `flagConfigEtag` (an event's `etag`) is honoured.
//!
//! The key comes as `Authorization: Bearer` or `X-API-Key`: an agent, admin or
//! operator key, as for `GET /v1/agents/{agent}/prompt`. Errors are OFREP's shapes
//! (`errorCode`, `errorDetails`); a refused key is the API's 401/403. Not in
//! `/openapi.json`: the contract is OFREP's, documented in docs/changes.md.

use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::fetch::{IfNoneMatch, respond};
use crate::app::AppState;
use crate::auth::Principal;
use crate::auth::keys::Role;
use crate::error::{Error, Kind};
use crate::fetch::encoded::Encoded;
use crate::fetch::ofrep::{self, Asking, Context, Evaluation, Failure, MAX_AGENTS};
use crate::fetch::{self, Viewer};
use crate::web::request::{authenticate_key, public};

/// How long an idle provider keeps its event stream (OFREP's default).
const INACTIVITY_SECONDS: u64 = 120;

pub fn routes() -> Router<AppState> {
    let other = || async { ApiError::method_not_allowed() };
    Router::new()
        .route("/ofrep/v1/evaluate/flags", post(bulk).fallback(other))
        .route(
            "/ofrep/v1/evaluate/flags/{key}",
            post(single).fallback(other),
        )
}

/// An evaluation request's body: `{"context": {...}}`.
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    context: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The bulk request's query: the event stream's metadata on a re-fetch it
/// triggered (`flagConfigLastModified` is accepted and not needed).
#[derive(Debug, Deserialize)]
struct BulkQuery {
    #[serde(rename = "flagConfigEtag")]
    flag_config_etag: Option<String>,
}

async fn single(
    State(state): State<AppState>,
    headers: HeaderMap,
    key: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let key = key.map(|Path(k)| k).unwrap_or_default();
    let who = match principal(&headers, &state).await {
        Ok(who) => who,
        Err(refused) => return refused.into_response(),
    };
    let context = match read_context(&body) {
        Ok(context) => context,
        Err(refusal) => return refusal.with_key(&key).into_response(),
    };
    let Some(parsed) = ofrep::parse_key(&key).filter(|k| who.reaches(&k.agent)) else {
        return not_found(&key);
    };
    let asking = asking(&state, &who, &context);
    match ofrep::evaluate(&state.prompts(), &asking, &parsed).await {
        Ok(evaluation) => Json(evaluation).into_response(),
        Err(e) => failed(&key, e),
    }
}

async fn bulk(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<BulkQuery>, QueryRejection>,
    body: Bytes,
) -> Response {
    let who = match principal(&headers, &state).await {
        Ok(who) => who,
        Err(refused) => return refused.into_response(),
    };
    let wanted = query.ok().and_then(|Query(q)| q.flag_config_etag);
    if let Some(generation) = wanted
        .as_deref()
        .and_then(crate::changes::frame::generation_of)
    {
        state.at_least(generation).await;
    }
    match evaluate_all(&state, &who, &body).await {
        Ok(answer) => respond(answer, &IfNoneMatch::of(&headers)),
        Err(refusal) => refusal.into_response(),
    }
}

/// The bulk answer.
#[derive(Serialize)]
struct Bulk {
    flags: Vec<Item>,
    #[serde(rename = "eventStreams")]
    event_streams: Vec<EventStream>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Item {
    Evaluated(Evaluation),
    Failed(Failure),
}

/// Where the change stream is: on this server (`origin` absent: the provider's
/// own base URL), for the agents evaluated.
#[derive(Serialize)]
struct EventStream {
    #[serde(rename = "type")]
    kind: &'static str,
    endpoint: Endpoint,
    #[serde(rename = "inactivityDelaySec")]
    inactivity_delay_sec: u64,
}

#[derive(Serialize)]
struct Endpoint {
    #[serde(rename = "requestUri")]
    request_uri: String,
}

async fn evaluate_all(state: &AppState, who: &Principal, body: &[u8]) -> Result<Encoded, Refusal> {
    let context = read_context(body)?;
    let agents = agents_of(state, who, &context).await?;
    let asking = asking(state, who, &context);
    let mut flags = Vec::new();
    for agent in &agents {
        let evaluated = ofrep::agent_flags(&state.prompts(), &asking, agent)
            .await
            .map_err(Refusal::of)?;
        flags.extend(evaluated.into_iter().map(|e| match e {
            Ok(evaluation) => Item::Evaluated(evaluation),
            Err(failure) => Item::Failed(failure),
        }));
    }
    let agent = who.agent.as_deref().or(context.agent.as_deref());
    let answer = Bulk {
        flags,
        event_streams: event_stream(state, who, agent).into_iter().collect(),
    };
    Encoded::new(&answer).map_err(|e| Refusal::of(Error::internal(e)))
}

/// The change stream for `who` (of `agent`, if one), with a token in its URL: an
/// `EventSource` sends no key. None without a secrets key to make tokens with:
/// providers then poll.
fn event_stream(state: &AppState, who: &Principal, agent: Option<&str>) -> Option<EventStream> {
    let now = state.clock.now();
    let token = crate::changes::token::issue(&state.secrets, who.key_id, agent, now)?;
    let token: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
    let request_uri = match agent {
        Some(agent) => format!("/v1/changes?agent={agent}&token={token}"),
        None => format!("/v1/changes?token={token}"),
    };
    Some(EventStream {
        kind: "sse",
        endpoint: Endpoint { request_uri },
        inactivity_delay_sec: INACTIVITY_SECONDS,
    })
}

/// The agents a bulk evaluation covers: the key's one, the context's one, or
/// every live agent up to [`MAX_AGENTS`].
async fn agents_of(
    state: &AppState,
    who: &Principal,
    context: &Context,
) -> Result<Vec<String>, Refusal> {
    let named = match (&who.agent, &context.agent) {
        (Some(scope), Some(asked)) if scope != asked => {
            return Err(Refusal::invalid(format!(
                "this key reaches agent {scope:?} only"
            )));
        }
        (Some(agent), _) | (None, Some(agent)) => Some(agent.clone()),
        (None, None) => None,
    };
    if let Some(agent) = named {
        fetch::agent(&state.prompts(), &agent)
            .await
            .map_err(|e| match e.kind {
                Kind::NotFound => Refusal::invalid(e.message),
                _ => Refusal::of(e),
            })?;
        return Ok(vec![agent]);
    }
    let names = ofrep::agent_names(&state.prompts(), MAX_AGENTS + 1)
        .await
        .map_err(Refusal::of)?;
    if names.len() > MAX_AGENTS {
        return Err(Refusal::invalid(format!(
            "this key reaches more than {MAX_AGENTS} agents: name one in context.agent"
        )));
    }
    Ok(names)
}

fn asking<'a>(state: &AppState, who: &'a Principal, context: &'a Context) -> Asking<'a> {
    Asking {
        viewer: Viewer {
            tenant: who.tenant(),
            member: &who.member,
            user: None,
        },
        context,
        now: state.clock.now(),
    }
}

fn read_context(body: &[u8]) -> Result<Context, Refusal> {
    let request: Request = match body.trim_ascii().is_empty() {
        true => Request { context: None },
        false => serde_json::from_slice(body)
            .map_err(|e| Refusal::parse(&format!("the body is not an evaluation request: {e}")))?,
    };
    Context::read(request.context.as_ref()).map_err(|e| Refusal::invalid(e.message))
}

/// The key from `Authorization: Bearer` or `X-API-Key`: an agent, admin or operator key.
async fn principal(headers: &HeaderMap, state: &AppState) -> Result<Principal, ApiError> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let presented = bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(Error::unauthorized)?;
    let who = authenticate_key(headers, presented, state).await?;
    match who.role {
        Role::Agent | Role::Admin | Role::Operator => Ok(who),
        _ => Err(Error::forbidden("an agent, admin or operator key")),
    }
}

fn not_found(key: &str) -> Response {
    let failure = Failure {
        key: key.to_owned(),
        error_code: "FLAG_NOT_FOUND",
        error_details: format!(
            "no flag {key:?}: keys are AGENT:prompt:CHANNEL, AGENT:tools:FORMAT, AGENT:model[:CHANNEL]"
        ),
    };
    (StatusCode::NOT_FOUND, Json(failure)).into_response()
}

/// One flag's failure: 404 `FLAG_NOT_FOUND`, 400 `INVALID_CONTEXT`, else 500.
fn failed(key: &str, error: Error) -> Response {
    let error = public(error);
    let failure = Failure::of(key, &error);
    let status = match failure.error_code {
        "FLAG_NOT_FOUND" => StatusCode::NOT_FOUND,
        "INVALID_CONTEXT" => StatusCode::BAD_REQUEST,
        _ => return Refusal::of(error).with_key(key).into_response(),
    };
    (status, Json(failure)).into_response()
}

/// A request refused whole, in OFREP's shape: 400 with `errorCode`, or 500 with
/// `errorDetails` only.
///
/// A 500 carries `errorCode` `GENERAL` (and the key, for one flag) besides the
/// `errorDetails` OFREP's shape has: the JavaScript provider reads a body
/// without them as malformed.
#[derive(Debug, Serialize)]
struct Refusal {
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(rename = "errorCode")]
    error_code: &'static str,
    #[serde(rename = "errorDetails")]
    error_details: String,
}

impl Refusal {
    fn parse(details: &str) -> Self {
        Self {
            key: None,
            error_code: "PARSE_ERROR",
            error_details: details.to_owned(),
        }
    }

    fn invalid(details: String) -> Self {
        Self {
            key: None,
            error_code: "INVALID_CONTEXT",
            error_details: details,
        }
    }

    /// loadout's error: bad input is `INVALID_CONTEXT`, anything else a 500.
    fn of(error: Error) -> Self {
        let error = public(error);
        match error.kind {
            Kind::Invalid | Kind::NotFound => Self::invalid(error.message),
            _ => Self {
                key: None,
                error_code: "GENERAL",
                error_details: error.message,
            },
        }
    }

    fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let status = match self.error_code {
            "GENERAL" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        (status, Json(self)).into_response()
    }
}
