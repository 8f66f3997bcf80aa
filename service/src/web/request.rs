//! What every entry point (the API, the MCP endpoint, the console) needs from a
//! request before it reaches a domain function: the principal behind its key
//! ([`authenticate`]), whether that key reaches an agent ([`reach`]), the cap on a
//! body ([`MAX_BODY_BYTES`]) and the NUL check on JSON ([`has_nul_escape`]), and
//! how an error is shown to a client ([`public`], in the one shape [`ErrorBody`]).

use axum::http::header;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::app::AppState;
use crate::auth::Principal;
use crate::auth::keys;
use crate::error::{Error as ApiError, Kind};

/// Request bodies larger than this get 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Refuses an agent a scoped key does not reach with the 404 an agent that does not
/// exist gets, so the key cannot tell the two apart.
pub fn reach(who: &Principal, agent: &str) -> Result<(), ApiError> {
    if who.reaches(agent) {
        return Ok(());
    }
    Err(crate::error::Error::not_found(format!(
        "no agent named {agent:?}"
    )))
}

/// The principal behind a request's `Authorization: Bearer` key (cached per
/// generation); 401 for a missing, unknown or revoked key.
pub async fn authenticate(
    headers: &axum::http::HeaderMap,
    state: &AppState,
) -> Result<Principal, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    authenticate_key(headers, presented, state).await
}

/// The principal behind `presented`, a key however the request carried it (the
/// Langfuse-compatible API takes it as Basic auth's password); as [`authenticate`].
pub async fn authenticate_key(
    headers: &axum::http::HeaderMap,
    presented: &str,
    state: &AppState,
) -> Result<Principal, ApiError> {
    let slot = state.keys.slot(presented);
    let generation = state.generation.current();
    if let Some(found) = state.keys.get(&state.generation, generation, slot) {
        return Ok(found);
    }
    // Only a key that exists is cached: unknown tokens cannot evict good keys. An
    // address with too many failures is refused (429) before the query runs.
    let lookup = crate::db::outage::read_retrying(|| keys::authenticate(&state.db, presented));
    let found = (state
        .auth_failures
        .guard(crate::web::client(headers), lookup)
        .await?)
        .ok_or_else(ApiError::unauthorized)?;
    state.keys.put(slot, generation, found.clone());
    Ok(found)
}

/// Whether a JSON text escapes a NUL character (`\u0000`). Postgres text cannot
/// hold one and SQLite would, so it is refused at the edge on both alike. Raw NULs
/// cannot appear in JSON strings (serde_json refuses control characters), so the
/// escape is the only way in; every backslash starts a two-or-more-byte escape, so
/// skipping the byte after each one keeps `\\u0000` (an escaped backslash) apart.
pub fn has_nul_escape(json: &[u8]) -> bool {
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &json[at..]) {
        let escape = at + found;
        if json[escape + 1..].starts_with(b"u0000") {
            return true;
        }
        at = escape + 2;
        if at >= json.len() {
            return false;
        }
    }
    false
}

/// What a 500 says; the cause is in the server log.
pub const INTERNAL_MESSAGE: &str = "internal error; see the server log";

/// `error` as a client may see it: an internal error is logged here, once, inside
/// the request's span, and told as [`INTERNAL_MESSAGE`] without details; any other
/// is public as it is. REST answers and MCP errors both go through it.
pub fn public(error: ApiError) -> ApiError {
    if error.kind != Kind::Internal {
        return error;
    }
    tracing::error!(error = %error.chain(), "request failed");
    ApiError::new(Kind::Internal, error.code, INTERNAL_MESSAGE)
}

/// Every error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: a stable code to branch on, a sentence for people, and
/// structured details where there are any (JSON paths, problems, known values).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable, e.g. `not_found`, `invalid_arguments`.
    pub code: String,
    pub message: String,
    /// `null` unless the code documents details.
    pub details: Value,
}
