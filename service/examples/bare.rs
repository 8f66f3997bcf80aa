//! The load benchmark's yardstick: a bare axum handler that returns a fixed JSON
//! body of a given size, with no auth, no database and no rendering.
//! `cargo run --release -p loadout --example bare -- 127.0.0.1:18090 7300 [loop|traced]`
//! With `loop`, it is served through loadout's own connection loop
//! (`loadout::transport::server::serve`, with its default limits) instead of `axum::serve`,
//! which separates the cost of the connection handling from that of the request path;
//! with `traced`, also inside loadout's request-wide layers, with the default log line.

use axum::Router;
use axum::http::header;
use axum::routing::get;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:18090".to_owned());
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7300);
    let body = format!("{{\"text\":\"{}\"}}", "a".repeat(size.saturating_sub(11)));
    let app = Router::new().route(
        "/{*path}",
        get(move || {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    eprintln!("bare listening on http://{bind}");
    let mode = args.next();
    if mode.as_deref() == Some("traced") {
        // The bare handler inside loadout's request-wide layers (request id, span,
        // `served` line, catch-panic), logging as `serve` does to stderr.
        let _flush = loadout::telemetry::init(loadout::telemetry::LogFormat::Text);
        let app = loadout::http::router::traced(app);
        let limits = loadout::transport::server::Limits::from(
            &loadout::app::Settings::from_env()
                .expect("settings")
                .connections,
        );
        return loadout::transport::server::serve(listener, app, limits, std::future::pending())
            .await;
    }
    if mode.as_deref() == Some("loop") {
        let limits = loadout::transport::server::Limits::from(
            &loadout::app::Settings::from_env()
                .expect("settings")
                .connections,
        );
        return loadout::transport::server::serve(listener, app, limits, std::future::pending())
            .await;
    }
    axum::serve(listener, app).await
}
