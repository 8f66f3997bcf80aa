//! The cached fetch without the network: `GET /v1/agents/assistant/prompt?channel=web`
//! (warm) sent through loadout's router in this process, next to the same request
//! through the bare handler's router, on one thread, with the default log line
//! written through loadout's own subscriber to a file. Prints ns per request, so a
//! change to the request path can be judged without the noise of a shared machine's
//! scheduler (wrk and the server share 2 cores in the network benchmark).
//! With THREADS above 1, a runtime of that many workers runs four request loops per
//! worker, so what the workers share (locks, counters, reference counts) shows.
//! `cargo run --release -p loadout --example cached_inproc -- [REQUESTS] [ROUNDS] [THREADS]`

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, header};
use axum::routing::get;
use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use loadout::prompt::builder::SystemClock;
use tower::ServiceExt;

const URL: &str = "/v1/agents/assistant/prompt?channel=web";

/// `n` requests through `app`, from `tasks` tasks at once; ns per request.
async fn run(app: &Router, key: &str, n: usize, tasks: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut running = Vec::new();
    for _ in 0..tasks {
        running.push(tokio::spawn(requests(
            app.clone(),
            key.to_owned(),
            n / tasks,
        )));
    }
    for task in running {
        task.await??;
    }
    Ok(started.elapsed().as_nanos() as f64 / n as f64)
}

async fn requests(app: Router, key: String, n: usize) -> anyhow::Result<()> {
    for _ in 0..n {
        let request = Request::get(URL)
            .header(header::AUTHORIZATION, &key)
            .body(Body::empty())?;
        let response = app.clone().oneshot(request).await?;
        anyhow::ensure!(response.status() == 200, "status {}", response.status());
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await?;
        std::hint::black_box(body);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(200_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let threads: usize = args.next().map_or(Ok(1), |a| a.parse())?;
    let runtime = if threads > 1 {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    runtime.block_on(bench(n, rounds, threads))
}

async fn bench(n: usize, rounds: usize, threads: usize) -> anyhow::Result<()> {
    // Four tasks per thread, as several connections per worker would be.
    let tasks = threads * 4;
    let dir = std::env::temp_dir().join(format!("loadout-inproc-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The log goes to a file, as `serve 2>serve.log` would: stderr is redirected.
    let log = std::fs::File::create(dir.join("serve.log"))?;
    let _flush = loadout::telemetry::init_to(loadout::telemetry::LogFormat::Text, log);
    let url = format!("sqlite://{}/bench.db?mode=rwc", dir.display());
    let db = loadout::db::connect(&url).await?;
    loadout::db::migrate::apply(&db, loadout::db::migrate::MigrateCommand::Up { n: None }).await?;
    loadout::registry::seed::run(
        &db,
        &loadout::registry::catalog::Seeds::embedded()?,
        chrono::Utc::now(),
    )
    .await?;
    let key = format!(
        "Bearer {}",
        keys::create(&db, "agent", Role::Agent, chrono::Utc::now()).await?
    );
    let state = AppState::new(
        db,
        loadout::app::Settings::from_env()?,
        loadout::secrets::Keyring::none(),
        Arc::new(SystemClock),
    )
    .await?;
    let app = loadout::http::router(state);
    let size = axum::body::to_bytes(
        app.clone()
            .oneshot(
                Request::get(URL)
                    .header(header::AUTHORIZATION, &key)
                    .body(Body::empty())?,
            )
            .await?
            .into_body(),
        usize::MAX,
    )
    .await?
    .len();
    let body = format!("{{\"text\":\"{}\"}}", "a".repeat(size.saturating_sub(11)));
    let bare = Router::new().route(
        "/{*path}",
        get(move || {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    for _ in 0..rounds {
        let loadout = run(&app, &key, n, tasks).await?;
        let bare = run(&bare, &key, n, tasks).await?;
        println!(
            "loadout {loadout:7.0} ns/request   bare {bare:5.0} ns/request   (body {size} bytes)"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
