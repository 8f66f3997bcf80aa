//! The HTTP API (axum 0.8): agents read prompts and tools, admins edit them,
//! approvers decide proposals.
//!
//! Handlers only parse the request (the [`extract`] extractors), call the domain and
//! map the result to a typed view; every failure is [`error::ApiError`]'s one JSON
//! shape, including unknown routes (404), wrong methods (405) and bad path, query or
//! body input (400/413).

pub mod agents;
pub mod calls;
pub mod connectors;
pub mod error;
pub mod extract;
pub mod fetch;
pub mod openapi;
pub mod ops;
pub mod registry;
pub mod trace;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use utoipa_axum::router::OpenApiRouter;

use crate::app::AppState;
use error::ApiError;

/// Request bodies larger than this get 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The whole API, and its OpenAPI description: every route is registered through
/// `utoipa_axum::routes!`, so a route cannot exist without being in the spec.
/// `/metrics` needs an admin key here; see [`ops::metrics_router`].
pub fn router(state: AppState) -> Router {
    let (router, _spec) = api_routes().split_for_parts();
    router
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), trace::trace))
        .with_state(state)
}

/// Every route with its documentation, by area.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(ops::routes())
        .merge(fetch::routes())
        .merge(agents::routes())
        .merge(registry::routes())
        .merge(calls::routes())
        .merge(connectors::routes())
}

/// The OpenAPI description of every route (what `/openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_routes().split_for_parts().1
}

/// Waits for SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
