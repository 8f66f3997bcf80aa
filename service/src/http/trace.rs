//! One span per request and one `served` line with its status and latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

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
    // `instrument`, not `enter`: a guard held across the await would leave the span
    // entered on this thread while the request waits, so every other request polled
    // there would nest under it, and log lines would grow without bound.
    let mut response = next.run(request).instrument(span.clone()).await;
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;
    use tracing_subscriber::layer::{Context, SubscriberExt};
    use tracing_subscriber::registry::LookupSpan;

    /// Records, for every `served` line, how many spans enclose it.
    struct Depths(Arc<Mutex<Vec<usize>>>);

    impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Depths {
        fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
            let depth = ctx.event_scope(event).map_or(0, |scope| scope.count());
            self.0.lock().expect("depths").push(depth);
        }
    }

    /// A request that waits while another is served on the same thread must not
    /// leave its span entered there: each `served` line has its own span only.
    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_request_does_not_adopt_the_next_ones_span() {
        let dir = std::env::temp_dir().join(format!("loadout-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("sqlite://{}/trace.db?mode=rwc", dir.display());
        let db = crate::db::connect(&url).await.expect("connect");
        crate::db::migrate::up(&db).await.expect("migrate");
        let clock = Arc::new(crate::prompt::builder::SystemClock);
        let state = crate::app::AppState::new(db, clock, 1024)
            .await
            .expect("state");

        let depths = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Depths(depths.clone()));
        let _default = tracing::subscriber::set_default(subscriber);
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let wait = Arc::new(Mutex::new(Some(wait)));
        let slow = get(move || {
            let wait = wait.lock().expect("wait").take();
            async move {
                if let Some(wait) = wait {
                    wait.await.ok();
                }
            }
        });
        let app = Router::new()
            .route("/slow", slow)
            .route("/fast", get(|| async {}))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                super::trace,
            ))
            .with_state(state);
        let request = |path: &str| {
            axum::http::Request::get(path)
                .body(Body::empty())
                .expect("request")
        };
        let slow = tokio::spawn(app.clone().oneshot(request("/slow")));
        tokio::task::yield_now().await; // the slow request is now waiting, mid-span
        app.oneshot(request("/fast")).await.expect("fast");
        release.send(()).ok();
        slow.await.expect("join").expect("slow");
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(*depths.lock().expect("depths"), [1, 1], "fast, then slow");
    }
}
