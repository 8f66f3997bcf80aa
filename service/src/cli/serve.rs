//! `loadout serve`: migrate and seed (unless told not to), give a database that
//! never had a key an operator key, then serve the API until SIGINT or SIGTERM,
//! finishing in-flight requests.

use std::sync::Arc;

use anyhow::Context;

use crate::app::Settings;
use crate::app::start::{Started, start};
use crate::http;
use crate::vocab::SystemClock;

/// Prepares the database, builds the state ([`start`]) and serves the API until
/// SIGINT or SIGTERM.
pub async fn run(database_url: &str, settings: Settings) -> anyhow::Result<()> {
    let (bind, metrics_bind) = (settings.bind, settings.metrics_bind);
    let drain = std::time::Duration::from_secs(settings.replicas.drain_seconds);
    let limits = crate::transport::server::Limits::from(&settings.connections);
    let Started { state, new_key } = start(database_url, settings, Arc::new(SystemClock)).await?;
    if let Some((name, key)) = new_key {
        println!("This database had no API key, so an operator key named {name:?} was created.");
        println!("It is shown only this once; store it now (loadout keys create makes more):");
        println!("{key}");
    }
    let jobs = state.spawn_jobs();
    let metrics = match metrics_bind {
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} for metrics"))?;
            eprintln!(
                "loadout metrics on http://{}/metrics",
                listener.local_addr().unwrap_or(address)
            );
            let router = http::ops::metrics_router(state.clone());
            Some(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, router).await {
                    tracing::error!(error = %e, "the metrics server failed");
                }
            }))
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr().unwrap_or(bind);
    tracing::info!(address = %local, "listening");
    if limits.max_connections_per_address > limits.max_connections / 2 {
        tracing::warn!(
            "--max-connections-per-address is over half of --max-connections: two client addresses can hold every connection"
        );
    }
    // Registered before anyone can read "listening": a SIGTERM sent at once drains.
    let stop = http::shutdown_signal();
    eprintln!("loadout listening on http://{local}");
    crate::transport::server::serve(
        listener,
        http::router(state.clone()),
        limits,
        drained(state, drain, stop),
    )
    .await
    .context("the server failed")?;
    drop(jobs);
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    Ok(())
}

/// Resolves when the server should stop accepting: at once on SIGINT; on SIGTERM
/// after `drain`, during which `/ready` answers 503 and requests are served.
async fn drained(
    state: crate::app::AppState,
    drain: std::time::Duration,
    stop: impl std::future::Future<Output = http::Stop>,
) {
    if stop.await == http::Stop::Terminate && !drain.is_zero() {
        state
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            seconds = drain.as_secs(),
            "draining: /ready answers 503 while requests are still served"
        );
        tokio::time::sleep(drain).await;
    }
    // Change streams never finish by themselves: end them, and their clients
    // reconnect to another replica.
    state.changes.close();
    tracing::info!("shutting down: finishing in-flight requests");
}
