//! The load benchmark's yardstick: a bare axum handler that returns a fixed JSON
//! body of a given size, with no auth, no database and no rendering.
//! `cargo run --release -p loadout --example bare -- 127.0.0.1:18090 7300`

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
    axum::serve(listener, app).await
}
