//! Requests through the real router, as a client sends them. Every response is
//! checked against the API contract ([`crate::contract`]) before a test sees it.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::app::AppState;
use serde_json::Value;
use tower::ServiceExt;

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
    let mut request = Request::builder().method(method.clone()).uri(path);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    if let Some(tag) = if_none_match {
        request = request.header(header::IF_NONE_MATCH, tag);
    }
    let request = request
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.map_or_else(Body::empty, Body::from))
        .expect("request");
    request_reply(state, request).await
}

/// Any request through the real router, its answer checked against the contract.
pub async fn request_reply(state: &AppState, request: Request<Body>) -> Reply {
    let method = request.method().clone();
    let path = request
        .uri()
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_owned();
    let response = loadout::http::router(state.clone())
        .oneshot(request)
        .await
        .expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let etag = headers
        .get(header::ETAG)
        .map(|v| v.to_str().expect("ascii").to_owned());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    crate::contract::assert_documented(method.as_str(), &path, status.as_u16(), &bytes);
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Reply {
        status,
        etag,
        headers,
        body,
    }
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
