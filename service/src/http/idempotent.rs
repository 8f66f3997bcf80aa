//! `Idempotency-Key` on the API's writes: a client whose write was in flight when
//! a connection dropped or a process died retries with the same key and gets the
//! first answer, never a second write. Tool calls carry their key in the body
//! (`idempotency_key`) and are left to the ledger; `/v1/keys`, `POST /v1/webhooks`
//! and `…/rotate-secret` take none (a secret in their answer must never be stored).
//!
//! - The key is recorded in the write's own transaction
//!   ([`crate::db::idempotency`]), per tenant (the caller key's), for 24 hours.
//! - The same key from the same API key, with the same method, path and body,
//!   answers the stored answer (`Idempotent-Replayed: true`); with another
//!   request, or from another API key (another agent's, say), 422
//!   `idempotency_key_reused`: the replay comes before the handler checks the
//!   caller's role and reach, so a stored answer is only ever replayed to the key
//!   that wrote it.
//! - A key whose write committed but whose answer was never stored (the process
//!   stopped in between), or whose request is still running, answers 409
//!   `idempotent_request_pending`: it was not applied twice; read the resource.
//! - A request refused before it wrote (400, 401, 409, 422 ...) records nothing: a
//!   retry runs again.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::{MAX_BODY_BYTES, authenticate};
use crate::app::AppState;
use crate::auth::Principal;
use crate::db::idempotency::{self, Pending};
use crate::error::Kind;

/// A handler's explicit view of the request's key: present when the request
/// sent one and it was not replayed. The handler hands it to the domain write
/// ([`key`]), whose transaction records it ([`crate::db::idempotency::record`]).
pub type Idempotency = Option<axum::Extension<Arc<Pending>>>;

/// The key an [`Idempotency`] holds, as domain writes take it.
pub fn key(idempotency: &Idempotency) -> Option<&Pending> {
    idempotency
        .as_ref()
        .map(|axum::Extension(pending)| pending.as_ref())
}

/// The request header.
pub const HEADER: &str = "idempotency-key";

/// Whether `route` takes an `Idempotency-Key`: every API write but tool calls,
/// which keep their own (in the body, in the ledger), and the writes whose answer
/// holds a secret, which is never stored: keys, a new webhook subscription and a
/// rotated webhook secret ([`holds_secret`]).
pub fn takes_key(route: &str) -> bool {
    route.starts_with("/v1/") && !route.ends_with("/tool-calls") && !holds_secret(route)
}

/// The routes whose answer holds a secret (a key, a webhook's signing secret).
pub fn holds_secret(route: &str) -> bool {
    route.starts_with("/v1/keys") || route == "/v1/webhooks" || route.ends_with("/rotate-secret")
}

/// Whether `request`, on `route`, is an API write that names a key.
pub fn applies(request: &Request, route: &str) -> bool {
    !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) && takes_key(route)
        && request.headers().contains_key(HEADER)
}

/// Answers a stored answer, or runs the request with its key to record.
pub async fn run(state: &AppState, request: Request, next: Next) -> Response {
    let (request, pending) = match prepare(state, request).await {
        Ok(Prepared::Run(request, pending)) => (request, pending),
        Ok(Prepared::Pass(request)) => return next.run(request).await,
        Err(answer) => return answer,
    };
    let (tenant, key) = (pending.tenant.clone(), pending.key.clone());
    let response = next.run(request).await;
    if !pending.recorded() {
        return response;
    }
    keep(state, &tenant, &key, response).await
}

enum Prepared {
    /// No caller to scope the key to: the handler answers (401, 403).
    Pass(Request),
    Run(Request, Arc<Pending>),
}

async fn prepare(state: &AppState, request: Request) -> Result<Prepared, Response> {
    let malformed = "Idempotency-Key must be 1 to 255 visible ASCII characters";
    let key = key_of(&request).ok_or_else(|| ApiError::invalid(malformed).into_response())?;
    let Ok(who) = authenticate(request.headers(), state).await else {
        return Ok(Prepared::Pass(request));
    };
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| match crate::transport::deadline::cut(&e) {
            Some(why) => ApiError::invalid(why).into_response(),
            None => ApiError::too_large(
                "payload_too_large",
                format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
            )
            .into_response(),
        })?;
    let fingerprint = fingerprint(&who, &parts, &body);
    let tenant = who.tenant().to_owned();
    let now = state.clock.now();
    let found = idempotency::find(&state.db, &tenant, &key, now)
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    match found {
        Some(row) if row.fingerprint != fingerprint => Err(ApiError::new(
            Kind::Refused,
            "idempotency_key_reused",
            "this Idempotency-Key was sent with a different request, or by another API key, in the last 24 hours; use a new key",
        )
        .into_response()),
        Some(row) => Err(replay(row.status, row.body)),
        None => {
            let pending = Pending::new(tenant, key, fingerprint, now);
            let mut request = Request::from_parts(parts, Body::from(body));
            // The handler hands it to the write that records it (`Idempotency`).
            request.extensions_mut().insert(Arc::clone(&pending));
            Ok(Prepared::Run(request, pending))
        }
    }
}

/// The request's key, when it is 1 to 255 visible ASCII characters.
fn key_of(request: &Request) -> Option<String> {
    request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|k| (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
}

/// SHA-256 of who sends it (the key's name and the agent it is scoped to; the
/// tenant is the record's), the method, the path with its query, and the body.
/// Binding the key in the fingerprint needs no column: another key's replay is
/// simply a different request.
fn fingerprint(who: &Principal, parts: &axum::http::request::Parts, body: &[u8]) -> String {
    let path = parts.uri.path_and_query().map_or("", |p| p.as_str());
    let scope = who.agent.as_deref().unwrap_or("*");
    let (key, method) = (&who.key_name, &parts.method);
    let mut signed = format!("{key:?} {scope:?}\n{method} {path}\n").into_bytes();
    signed.extend_from_slice(body);
    crate::digest::sha256_hex(&signed)
}

/// The stored answer, or 409 when there is none (yet).
fn replay(status: Option<i32>, body: Option<String>) -> Response {
    let stored = status
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok());
    let Some(status) = stored else {
        return ApiError::new(
            Kind::Conflict,
            "idempotent_request_pending",
            "a request with this Idempotency-Key was applied, or is still running, and its answer is not stored: it was not applied twice; read the resource to see the outcome",
        )
        .into_response();
    };
    let mut response = (status, body.unwrap_or_default()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

/// Stores the answer of a request whose write recorded its key, and answers it.
async fn keep(state: &AppState, tenant: &str, key: &str, response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 16 * MAX_BODY_BYTES).await else {
        return ApiError::internal("an answer could not be read to store it").into_response();
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if let Err(e) = idempotency::store(&state.db, tenant, key, parts.status.as_u16(), text).await {
        // The write stands; a retry will hear 409 pending instead of this answer.
        tracing::warn!(error = %e, "an idempotent answer was not stored");
    }
    Response::from_parts(parts, Body::from(bytes))
}
