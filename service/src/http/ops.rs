//! Operations: liveness, readiness and metrics.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, E401, E403, E503};
use super::extract::OperatorKey;
use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(metrics))
}

/// `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    pub status: &'static str,
}

#[utoipa::path(get, path = "/metrics", tag = "operations", summary = "Prometheus metrics (operator key, or open on --metrics-bind)",
    responses((status = 200, description = "The metrics in the OpenMetrics text format: labelled `application/openmetrics-text` when the client's Accept names it (Prometheus does), `text/plain` otherwise",
        content((String = "application/openmetrics-text"), (String = "text/plain"))), E401, E403))]
async fn metrics(State(state): State<AppState>, _key: OperatorKey, headers: HeaderMap) -> Response {
    metrics_text(&state, &headers)
}

/// `/metrics` alone and open, for a separate `--metrics-bind` address that only
/// the scraper can reach.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(
                |State(state): State<AppState>, headers: HeaderMap| async move {
                    metrics_text(&state, &headers)
                },
            ),
        )
        .with_state(state)
}

fn metrics_text(state: &AppState, headers: &HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| memchr::memmem::find(v.as_bytes(), b"application/openmetrics-text").is_some());
    match state.metrics.render() {
        Ok(text) => {
            let content_type = HeaderValue::from_static(match openmetrics {
                true => crate::metrics::CONTENT_TYPE,
                false => "text/plain; charset=utf-8",
            });
            ([(header::CONTENT_TYPE, content_type)], text).into_response()
        }
        Err(e) => {
            ApiError::internal(format_args!("cannot encode the metrics: {e}")).into_response()
        }
    }
}

#[utoipa::path(get, path = "/health", tag = "operations", summary = "Liveness (no key)", security(()),
    responses((status = 200, description = "The process answers", body = Status)))]
async fn health() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// Ready when the database answers, every migration is applied and it takes a
/// write (a full disk leaves reads working); otherwise 503 saying in words what
/// is wrong.
#[utoipa::path(get, path = "/ready", tag = "operations", summary = "Readiness: database reachable, migrations current (no key)", security(()),
    responses((status = 200, description = "Ready", body = Status), E503))]
async fn ready(State(state): State<AppState>) -> Result<Json<Status>, ApiError> {
    match tokio::time::timeout(READY_WITHIN, readiness(&state)).await {
        Ok(answer) => answer,
        Err(_) => Err(ApiError::new(
            crate::error::Kind::Unavailable,
            NOT_READY,
            "the database did not answer within 1 s",
        )),
    }
}

/// How long `/ready` waits for the database: a balancer's health check reads an
/// answer instead of timing out.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// The code of a `/ready` that is not ready.
pub const NOT_READY: &str = "not_ready";

async fn readiness(state: &AppState) -> Result<Json<Status>, ApiError> {
    let not_ready = |why: String| ApiError::new(crate::error::Kind::Unavailable, NOT_READY, why);
    if state.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(not_ready(
            "this replica is shutting down: requests are still served while balancers move away"
                .into(),
        ));
    }
    // While requests fail fast, so does this: a balancer sends none here.
    if state.breaker.is_open() {
        return Err(not_ready(
            "the database does not answer; this replica fails fast until it does".into(),
        ));
    }
    crate::db::migrate::readiness(&state.db)
        .await
        .map_err(not_ready)?;
    crate::db::probe_write(&state.db).await.map_err(|e| {
        let why = match crate::db::classify(&e) {
            crate::db::DbFailure::Storage => {
                "the database cannot write: its disk is full or failing"
            }
            _ => "the database does not take writes",
        };
        tracing::warn!(error = %e, "{why}");
        not_ready(why.to_owned())
    })?;
    Ok(Json(Status { status: "ready" }))
}
