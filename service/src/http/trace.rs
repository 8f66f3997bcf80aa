//! Request tracing through tower-http: an id per request (set when the client sent
//! none, echoed as `x-request-id`), one span per request that `TraceLayer` enters
//! only while it polls (never held across an await), one `served` line with the
//! status and latency, panics answered in our 500 shape; and the edge: metrics per
//! route, and bodies refused by their declared length before anything reads them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::request_id::{MakeRequestId, RequestId};

use super::error::{ApiError, DatabaseDown, RETRY_AFTER_SECONDS};
use super::extract::MAX_BODY_BYTES;
use crate::app::AppState;
use crate::console::session::{MAX_FORM_BYTES, SIGN_IN};
use crate::db::outage::{self, FAIL_FAST, SUSPECT_AFTER};

/// The header that carries a request's id in and out.
pub const REQUEST_ID: &str = "x-request-id";

/// Request ids made here: the process id and a sequence number, so ids from two
/// replicas in one log do not collide.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sequence;

impl MakeRequestId for Sequence {
    fn make_request_id<B>(&mut self, _request: &axum::http::Request<B>) -> Option<RequestId> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let process = PROCESS.get_or_init(|| format!("{:x}-", std::process::id()));
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut id = String::with_capacity(process.len() + 20);
        id.push_str(process);
        id.push_str(&n.to_string());
        HeaderValue::try_from(id).ok().map(RequestId::new)
    }
}

/// A client's own request id is logged only if it is short, visible ASCII
/// (logs stay bounded and parseable); it is echoed back either way.
fn usable_id(value: &HeaderValue) -> Option<&str> {
    let bytes = value.as_bytes();
    let usable =
        !bytes.is_empty() && bytes.len() <= 64 && bytes.iter().all(|b| b.is_ascii_graphic());
    usable.then(|| value.to_str().ok()).flatten()
}

/// The request's span: its id, method and path (never the query, body or headers).
pub fn span(request: &axum::http::Request<Body>) -> tracing::Span {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(usable_id)
        .unwrap_or("-");
    tracing::info_span!("request", id, method = %request.method(), path = %request.uri().path())
}

/// The one line per request, inside its span.
pub fn served<B>(response: &axum::http::Response<B>, latency: Duration, _span: &tracing::Span) {
    tracing::info!(
        status = response.status().as_u16(),
        latency_us = latency.as_micros() as u64,
        "served"
    );
}

/// A panic in a handler answers our 500 (the panic itself is logged by the hook).
pub fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("a handler panicked").into_response()
}

/// The edge of every request: a body declared larger than the limit is refused at
/// once, before any extractor (or the key check) runs and before a byte of it is
/// read; every request is counted and timed by route template, method and status.
pub async fn edge(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    let started = Instant::now();
    // The sign-in form is read before any key is checked: it gets a small limit.
    let limit = match route.as_str() {
        SIGN_IN => MAX_FORM_BYTES,
        r if super::config_as_code::LARGE_BODY_ROUTES.contains(&r) => {
            super::config_as_code::MAX_CONFIG_BYTES
        }
        _ => MAX_BODY_BYTES,
    };
    let response = match declared {
        Some(n) if n > limit as u64 => too_large(&route, limit),
        // Boxed: a write's idempotency future is kilobytes, and held inline it made
        // this future (which axum moves into its box on every request, reads too)
        // that large: two copies of ~7 KB were a fifth of a cached fetch's work.
        _ if super::idempotent::applies(&request, &route) => {
            let run = Box::pin(super::idempotent::run(&state, request, next));
            guarded(&state, &route, run).await
        }
        _ => guarded(&state, &route, next.run(request)).await,
    };
    state.metrics.record(
        route,
        &method,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// Runs a request through the database breaker: while it is open the request may
/// take [`FAIL_FAST`] before it is answered 503 (`/ready` answers at once); while it
/// is closed, a request that waits is [`watched`]. An answer saying the database did
/// not answer opens it; every 503 says `Retry-After`.
async fn guarded(state: &AppState, route: &str, run: impl Future<Output = Response>) -> Response {
    let mut response = if state.breaker.is_open() && route != "/ready" {
        match tokio::time::timeout(FAIL_FAST, run).await {
            Ok(response) => response,
            Err(_) => unanswered(route),
        }
    } else {
        watched(state, route, run).await
    };
    if response.extensions().get::<DatabaseDown>().is_some() {
        state.breaker.trip(&state.db);
    }
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .entry(header::RETRY_AFTER)
            .or_insert(HeaderValue::from_static(RETRY_AFTER_SECONDS));
    }
    response
}

/// Runs a request; one still running after [`SUSPECT_AFTER`] goes on only while the
/// database takes connections ([`outage::Breaker::reachable`], asked again every
/// [`SUSPECT_AFTER`]). When it takes none the request is answered 503 at once and the
/// breaker opens, instead of the request waiting for the pool's acquire timeout; a
/// request that waits for a busy pool or a lock goes on waiting, as the database answers.
async fn watched(state: &AppState, route: &str, run: impl Future<Output = Response>) -> Response {
    let mut run = std::pin::pin!(run);
    if let Ok(response) = tokio::time::timeout(SUSPECT_AFTER, run.as_mut()).await {
        return response;
    }
    let gone = async {
        while state.breaker.reachable(&state.db).await {
            tokio::time::sleep(SUSPECT_AFTER).await;
        }
    };
    tokio::select! {
        response = run.as_mut() => response,
        () = gone => unanswered(route),
    }
}

/// A request cut because the database does not answer: a page for the console,
/// `/ready`'s `not_ready`, our error elsewhere.
fn unanswered(route: &str) -> Response {
    let code = match route {
        "/ready" => super::ops::NOT_READY,
        _ => outage::CODE,
    };
    let error = ApiError::new(
        crate::error::Kind::Unavailable,
        code,
        "the database does not answer; retry in a moment",
    );
    match route.starts_with("/console") {
        true => crate::console::page::error_page(None, &error),
        false => error.into_response(),
    }
}

fn too_large(route: &str, limit: usize) -> Response {
    let error = ApiError::too_large(
        "payload_too_large",
        format!("request bodies are limited to {limit} bytes"),
    );
    let mut response = match route.starts_with("/console") {
        true => crate::console::page::error_page(None, &error),
        false => error.into_response(),
    };
    // The body is never read: do not keep the connection for another request.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use tower::ServiceExt;
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    /// A span's `id` field.
    struct Id(String);

    /// Finds one field's text (`id` on spans, `message` on events).
    struct Find(&'static str, Option<String>);

    impl Visit for Find {
        fn record_str(&mut self, field: &Field, value: &str) {
            if field.name() == self.0 {
                self.1 = Some(value.to_owned());
            }
        }

        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == self.0 {
                self.1 = Some(format!("{value:?}"));
            }
        }
    }

    /// For every `served` line, the ids of the request spans that enclose it.
    struct Served(Arc<Mutex<Vec<Vec<String>>>>);

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Served {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            id: &tracing::span::Id,
            ctx: Context<'_, S>,
        ) {
            let mut find = Find("id", None);
            attrs.record(&mut find);
            if let (Some(span), Some(value)) = (ctx.span(id), find.1) {
                span.extensions_mut().insert(Id(value));
            }
        }

        fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
            let mut find = Find("message", None);
            event.record(&mut find);
            if find.1.as_deref() != Some("served") {
                return;
            }
            let ids = ctx.event_scope(event).map_or_else(Vec::new, |scope| {
                scope
                    .filter(|span| span.name() == "request")
                    .filter_map(|span| span.extensions().get::<Id>().map(|id| id.0.clone()))
                    .collect()
            });
            self.0.lock().expect("served").push(ids);
        }
    }

    /// Requests that wait on the database interleave on one thread: each `served`
    /// line must carry exactly its own request's span, and no other.
    #[tokio::test(flavor = "current_thread")]
    async fn each_log_line_carries_exactly_its_own_requests_span() {
        let dir = std::env::temp_dir().join(format!("loadout-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite://{}/trace.db?mode=rwc", dir.display());
        let db = crate::db::connect(&url).await.expect("connect");
        crate::db::migrate::up(&db).await.expect("migrate");
        let seeds = crate::registry::catalog::Seeds::embedded().expect("seeds");
        crate::registry::seed::run(&db, &seeds, chrono::Utc::now())
            .await
            .expect("seed");
        let key = crate::auth::keys::create(
            &db,
            "agent",
            crate::auth::keys::Role::Agent,
            chrono::Utc::now(),
        )
        .await
        .expect("key");
        let clock = Arc::new(crate::prompt::builder::SystemClock);
        let state = crate::app::AppState::new(
            db,
            crate::app::Settings::from_flags(["--max-template-bytes", "1024"]).expect("settings"),
            crate::secrets::Keyring::none(),
            clock,
        )
        .await
        .expect("state");
        let app = crate::http::router(state);

        let served = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Served(served.clone()));
        let _default = tracing::subscriber::set_default(subscriber);
        // A new user each time: every request waits on the database for instructions.
        let requests: Vec<_> = (0..24)
            .map(|i| {
                let request = axum::http::Request::get(format!(
                    "/v1/agents/assistant/prompt?channel=web&user_id=user-{i}"
                ))
                .header("authorization", format!("Bearer {key}"))
                .body(Body::empty())
                .expect("request");
                tokio::spawn(app.clone().oneshot(request))
            })
            .collect();
        let mut ids = Vec::new();
        for request in requests {
            let response = request.await.expect("join").expect("infallible");
            assert_eq!(response.status(), 200);
            let id = response
                .headers()
                .get(super::REQUEST_ID)
                .expect("x-request-id");
            ids.push(vec![id.to_str().expect("ascii").to_owned()]);
        }
        std::fs::remove_dir_all(&dir).ok();
        let mut lines = served.lock().expect("served").clone();
        lines.sort();
        ids.sort();
        assert_eq!(lines, ids, "each line's request spans, by line");
    }
}
