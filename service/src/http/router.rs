//! The router: every area's routes with their documentation, the fallbacks for
//! unknown routes (404) and methods (405), the body limit and the request trace.

use std::sync::LazyLock;

use axum::extract::DefaultBodyLimit;
use axum::{Json, Router, middleware};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::MAX_BODY_BYTES;
use super::{agents, calls, connectors, fetch, keys, ops, registry, trace};
use crate::app::AppState;

/// The whole API. Every route is registered through `utoipa_axum::routes!`, so a
/// route cannot exist without being in `/openapi.json`. `/metrics` needs an admin
/// key here; see [`ops::metrics_router`].
pub fn router(state: AppState) -> Router {
    let (router, _spec) = api_routes().split_for_parts();
    // Outermost last: an id is set (unless the client sent one), the span and the
    // `served` line wrap everything, the id is echoed, panics become our 500, and
    // the edge refuses an oversize body and records metrics with the final status.
    let trace = TraceLayer::new_for_http()
        .make_span_with(trace::span)
        .on_request(())
        .on_response(trace::served)
        .on_failure(());
    router
        .merge(crate::console::router())
        .merge(super::mcp::routes(&state))
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), trace::edge))
        .layer(CatchPanicLayer::custom(trace::panic_response))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
        .layer(trace)
        .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, trace::Sequence))
        .with_state(state)
}

const REQUEST_ID_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static(trace::REQUEST_ID);

/// The OpenAPI description of every route (what `/openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut openapi = api_routes().split_for_parts().1;
    super::openapi::finish(&mut openapi);
    openapi
}

/// Every route with its documentation, by area.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(super::openapi::base())
        .routes(routes!(openapi_json))
        .merge(ops::routes())
        .merge(fetch::routes())
        .merge(agents::routes())
        .merge(registry::routes())
        .merge(calls::routes())
        .merge(connectors::routes())
        .merge(keys::routes())
}

static SPEC: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(openapi);

#[utoipa::path(get, path = "/openapi.json", tag = "operations", summary = "This OpenAPI description (no key)", security(()),
    responses((status = 200, description = "OpenAPI 3.1 JSON", content_type = "application/json", body = Object)))]
async fn openapi_json() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(&*SPEC)
}
