//! One span per request and one `served` line with its status and latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use crate::app::AppState;

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(1);

/// One span per request with an id (echoed as `x-request-id`), and one log line with
/// the status and latency. Never the body: prompts and keys stay out of logs.
pub async fn trace(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let id = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    let span = tracing::info_span!("request", id, %method, %path);
    let started = Instant::now();
    let mut response = {
        let _enter = span.enter();
        next.run(request).await
    };
    let elapsed = started.elapsed();
    state
        .metrics
        .record(route, &method, response.status().as_u16(), elapsed);
    let micros = elapsed.as_micros();
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_us = micros as u64,
            "served"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
