//! Langfuse's prompt read API, so that tools reading prompts from Langfuse (its
//! SDKs, LiteLLM, promptfoo, Flowise, ...) read loadout's unchanged:
//! `GET /api/public/v2/prompts/{name}?version=&label=` answers Langfuse's
//! `TextPrompt` ([`crate::fetch::langfuse`] says what each field holds).
//!
//! - Langfuse's key pair arrives as Basic auth: the secret key is a loadout key (an
//!   agent, admin or operator key, as for `GET /v1/agents/{agent}/prompt`); the
//!   public key is not a secret and is not read. A Bearer key works too.
//! - Read-only: everything else under `/api/public` is refused, never invented, in
//!   Langfuse's error shape `{"message", "error"}` with the status Langfuse uses.
//! - Not in `/openapi.json`: the contract is Langfuse's, documented in docs/langfuse.md.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use crate::app::AppState;
use crate::auth::keys::Role;
use crate::error::{Error, Kind};
use crate::fetch::langfuse::{self, TextPrompt, Wanted};
use crate::web::request::{authenticate_key, public, reach};

/// The routes, under `/api/public`; anything else there is a Langfuse-shaped 404.
pub fn routes() -> Router<AppState> {
    let read_only = || async { LangfuseError(read_only()) };
    let api = Router::new()
        .route("/v2/prompts", get(read_only).post(read_only))
        .route(
            "/v2/prompts/{*name}",
            get(get_prompt)
                .patch(read_only)
                .delete(read_only)
                .post(read_only),
        )
        .fallback(|| async {
            LangfuseError(Error::not_found(
                "loadout answers Langfuse's prompt read API only: GET /api/public/v2/prompts/{name}",
            ))
        });
    Router::new().nest("/api/public", api)
}

fn read_only() -> Error {
    Error::new(
        Kind::MethodNotAllowed,
        "read_only",
        "loadout's Langfuse-compatible API reads prompts only (GET /api/public/v2/prompts/{name}); change prompts in loadout",
    )
}

/// What a Langfuse client sends besides the name (other parameters are ignored,
/// as a peer may send more than loadout reads).
#[derive(Debug, Deserialize)]
struct PromptQuery {
    version: Option<String>,
    label: Option<String>,
}

async fn get_prompt(
    State(state): State<AppState>,
    headers: HeaderMap,
    name: Result<Path<String>, PathRejection>,
    query: Result<Query<PromptQuery>, QueryRejection>,
) -> Result<Json<TextPrompt>, LangfuseError> {
    let who = principal(&headers, &state).await?;
    let Path(name) = name.map_err(|e| Error::invalid(e.body_text()))?;
    let Query(q) = query.map_err(|e| Error::invalid(e.body_text()))?;
    let version =
        match q.version.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => Some(v.parse::<i32>().map_err(|_| {
                Error::invalid(format!("version must be a whole number, not {v:?}"))
            })?),
            None => None,
        };
    let (agent, _) = langfuse::split(&name)?;
    reach(&who, agent)?;
    let wanted = Wanted {
        name: &name,
        version,
        label: q.label.as_deref().filter(|l| !l.is_empty()),
    };
    Ok(Json(
        langfuse::prompt(&state.prompts(), who.tenant(), &who.member, wanted).await?,
    ))
}

/// The key from Basic auth's password (Langfuse's secret key) or a Bearer token;
/// an agent, admin or operator key.
async fn principal(
    headers: &HeaderMap,
    state: &AppState,
) -> Result<crate::auth::Principal, LangfuseError> {
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let secret = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("basic") => BASE64
            .decode(token.trim())
            .ok()
            .and_then(|pair| String::from_utf8(pair).ok())
            .and_then(|pair| pair.split_once(':').map(|(_, s)| s.trim().to_owned())),
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Some(token.trim().to_owned())
        }
        _ => None,
    };
    let secret = secret
        .filter(|s| !s.is_empty())
        .ok_or_else(Error::unauthorized)?;
    let who = authenticate_key(headers, &secret, state).await?;
    match who.role {
        Role::Agent | Role::Admin | Role::Operator => Ok(who),
        _ => Err(Error::forbidden("an agent, admin or operator key").into()),
    }
}

/// An error in Langfuse's shape: `message` for people, `error` naming the class
/// Langfuse's server raises for that status.
pub struct LangfuseError(Error);

impl From<Error> for LangfuseError {
    fn from(error: Error) -> Self {
        Self(error)
    }
}

#[derive(Serialize)]
struct Body {
    message: String,
    error: &'static str,
}

impl IntoResponse for LangfuseError {
    fn into_response(self) -> Response {
        let retry_after = crate::web::retry_after(&self.0);
        let error = public(self.0);
        let status = crate::web::status(error.kind);
        let name = match error.kind {
            Kind::Invalid | Kind::Refused | Kind::TooLarge => "InvalidRequestError",
            Kind::Unauthenticated => "UnauthorizedError",
            Kind::Forbidden => "ForbiddenError",
            Kind::NotFound => "LangfuseNotFoundError",
            Kind::MethodNotAllowed => "MethodNotAllowedError",
            Kind::TooManyRequests => "TooManyRequestsError",
            Kind::Conflict => "LangfuseConflictError",
            Kind::NotRunnable | Kind::Unavailable => "ServiceUnavailableError",
            Kind::Internal => "InternalServerError",
        };
        let message = match error.kind {
            Kind::Unauthenticated => {
                "a loadout key is required: Langfuse's key pair with a loadout agent, admin or operator key as the secret key".to_owned()
            }
            _ => error.message,
        };
        let body = Body {
            message,
            error: name,
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, seconds);
        }
        response
    }
}
