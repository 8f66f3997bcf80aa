//! Requests through the real router of a state (a replica's, say), as a client
//! sends them; [`crate::support::app::TestApp`] has the same for the application under test.
//! Every response is checked against the API contract ([`crate::support::contract`]) before
//! a test sees it.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::app::AppState;
use serde_json::Value;

/// What a test reads of a response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub etag: Option<String>,
    pub headers: axum::http::HeaderMap,
    /// JSON, `Null` when empty, or a string for a text body (`/metrics`).
    pub body: Value,
}

/// One request; `body` is sent as is (it need not be valid JSON).
pub async fn send(
    state: &AppState,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
    if_none_match: Option<&str>,
) -> Reply {
    request_reply(state, request(method, path, key, body, if_none_match)).await
}

/// A request as a client sends it: a bearer key, a JSON body as given, an `If-None-Match`.
pub fn request(
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Vec<u8>>,
    if_none_match: Option<&str>,
) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    if let Some(tag) = if_none_match {
        request = request.header(header::IF_NONE_MATCH, tag);
    }
    request
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request")
}

/// Any request through the real router, its answer checked against the contract.
pub async fn request_reply(state: &AppState, request: Request<Body>) -> Reply {
    crate::support::app::through(loadout::http::router(state.clone()), request).await
}

/// A JSON request with a key: `(status, body)`.
pub async fn call(
    state: &AppState,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let body = body.map(|b| b.to_string().into_bytes());
    let reply = send(state, method, path, Some(key), body, None).await;
    (reply.status, reply.body)
}
