//! The router: every area's routes with their documentation, the fallbacks for
//! unknown routes (404) and methods (405), the body limit and the request trace.

use std::sync::LazyLock;

use axum::extract::DefaultBodyLimit;
use axum::{Json, Router, middleware};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::MAX_BODY_BYTES;
use super::{
    agents, calls, changes, config_as_code, connectors, evals, fetch, groups, keys, langfuse,
    members, ofrep, ops, outcomes, promotion, registry, releases, rollouts, trace, webhooks,
};
use crate::app::AppState;

/// The whole API. Every route is registered through `utoipa_axum::routes!`, so a
/// route cannot exist without being in `/openapi.json`. `/metrics` needs an admin
/// key here; see [`ops::metrics_router`].
pub fn router(state: AppState) -> Router {
    let (router, _spec) = api_routes().split_for_parts();
    // Only the edge needs the matched route, so only the edge is a route layer. The
    // request-wide layers wrap the routed app once, outside it: `Router::layer` would
    // wrap every route in each of them, and each wrap is a boxed service that every
    // request clones and a boxed future it allocates.
    let routed = router
        .merge(crate::console::router())
        .merge(crate::mcp::routes(&state))
        .merge(langfuse::routes())
        .merge(ofrep::routes())
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(middleware::from_fn_with_state(state.clone(), trace::edge))
        .with_state(state);
    traced(routed)
}

/// `app` inside the request-wide layers. Outermost first: an id is set (unless the
/// client sent one), the span and the `served` line wrap everything, the id is
/// echoed, panics become our 500, and the body limit applies to every extractor.
pub fn traced(app: Router) -> Router {
    let trace = TraceLayer::new_for_http()
        .make_span_with(trace::span)
        .on_request(())
        .on_response(trace::served)
        .on_failure(());
    let app = ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, trace::Sequence))
        .layer(trace)
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
        .layer(CatchPanicLayer::custom(trace::panic_response))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .service(app);
    Router::new().fallback_service(app)
}

const REQUEST_ID_HEADER: axum::http::HeaderName =
    axum::http::HeaderName::from_static(trace::REQUEST_ID);

/// The OpenAPI description of every route (what `/openapi.json` serves).
pub fn openapi() -> serde_json::Value {
    let mut openapi = api_routes().split_for_parts().1;
    super::openapi::finish(&mut openapi);
    super::openapi::for_generators(openapi)
}

/// Every route with its documentation, by area.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(super::openapi::base())
        .routes(routes!(openapi_json))
        .merge(ops::routes())
        .merge(fetch::routes())
        .merge(changes::routes())
        .merge(agents::routes())
        .merge(releases::routes())
        .merge(promotion::routes())
        .merge(outcomes::routes())
        .merge(rollouts::routes())
        .merge(registry::routes())
        .merge(calls::routes())
        .merge(connectors::routes())
        .merge(keys::routes())
        .merge(members::routes())
        .merge(groups::routes())
        .merge(webhooks::routes())
        .merge(evals::routes())
        .merge(config_as_code::routes())
}

static SPEC: LazyLock<serde_json::Value> = LazyLock::new(openapi);

#[utoipa::path(get, path = "/openapi.json", tag = "operations", summary = "This OpenAPI description (no key)", security(()),
    responses((status = 200, description = "OpenAPI 3.1 JSON", content_type = "application/json", body = Object)))]
async fn openapi_json() -> Json<&'static serde_json::Value> {
    Json(&*SPEC)
}
