//! The web console: server-rendered pages for admins (prompts, tools, links,
//! channels, connectors, keys, webhooks, evaluation runs) and approvers (the
//! proposal queue), on the API's port.
//!
//! A page handler reads the domain through the same functions as the JSON API,
//! renders a minijinja template from `templates/console/` (embedded), and for a
//! form post redirects (post/redirect/get). A request made by htmx (`HX-Request`)
//! gets the partial it asked for; every other request gets the whole page, so every
//! page works without JavaScript. Sign-in, sessions and CSRF are in [`session`].

pub mod agents;
pub mod connectors;
pub mod evals;
pub mod model;
pub mod page;
pub mod pages;
pub mod policies;
pub mod proposals;
pub mod registry;
pub mod releases;
pub mod rollouts;
pub mod session;
pub mod webhooks;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::app::AppState;

/// Every console route. `GET /` sends a newcomer to the console.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console/") }))
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .route("/console/assets/{file}", get(asset))
        .route(
            session::SIGN_IN,
            get(session::sign_in_page)
                .post(session::sign_in)
                .layer(DefaultBodyLimit::max(session::MAX_FORM_BYTES)),
        )
        .route("/console/sign-out", post(session::sign_out))
        .route("/console/sso/start", get(session::sso_start))
        .route("/console/sso/callback", get(session::sso_callback))
        .merge(pages::routes())
        .merge(agents::routes())
        .merge(policies::routes())
        .merge(model::routes())
        .merge(releases::routes())
        .merge(rollouts::routes())
        .merge(proposals::routes())
        .merge(registry::routes())
        .merge(connectors::routes())
        .merge(webhooks::routes())
        .merge(evals::routes())
        .layer(axum::middleware::map_response(no_framing))
}

/// No other site may frame a console page (clickjacking): `frame-ancestors
/// 'none'`, and `X-Frame-Options: DENY` for browsers that predate it.
async fn no_framing(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static("frame-ancestors 'none'"),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    response
}

/// The vendored script and the style sheet, cached for a day.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let (body, kind): (&'static str, &'static str) = match file.as_str() {
        "htmx.min.js" => (
            include_str!("../../templates/console/assets/htmx-2.0.11.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.css" => (
            include_str!("../../templates/console/assets/console.css"),
            "text/css; charset=utf-8",
        ),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response()
}
