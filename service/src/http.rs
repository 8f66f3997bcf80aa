//! The HTTP API (axum 0.8): agents read prompts and tools, admins edit them,
//! approvers decide proposals.
//!
//! Handlers only parse the request (the [`extract`] extractors), call the domain and
//! map the result to a typed view; every failure is [`error::ApiError`]'s one JSON
//! shape, including unknown routes (404), wrong methods (405) and bad path, query or
//! body input (400/413).

pub mod agents;
pub mod calls;
pub mod changes;
pub mod config_as_code;
pub mod connectors;
pub mod error;
pub mod evals;
pub mod extract;
pub mod fetch;
pub mod groups;
pub mod idempotent;
pub mod keys;
pub mod langfuse;
pub mod members;
pub mod ofrep;
pub mod openapi;
pub mod ops;
pub mod outcomes;
pub mod promotion;
pub mod registry;
pub mod releases;
pub mod rollouts;
pub mod router;
pub mod trace;
pub mod webhooks;

pub use extract::MAX_BODY_BYTES;
pub use router::{openapi, router};

/// Which signal asked the process to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C): a person at a terminal; stop now.
    Interrupt,
    /// SIGTERM: a supervisor or an orchestrator; drain first.
    Terminate,
}

/// Registers for SIGINT and SIGTERM at once (so a signal sent the moment after this
/// returns is caught, not the default action that kills the process) and returns
/// what waits for the first of them and says which came.
#[cfg(unix)]
pub fn shutdown_signal() -> impl std::future::Future<Output = Stop> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    async fn received(signal: std::io::Result<Signal>, name: &str) {
        match signal {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for {name}");
                std::future::pending::<()>().await;
            }
        }
    }
    let interrupt = received(signal(SignalKind::interrupt()), "SIGINT");
    let terminate = received(signal(SignalKind::terminate()), "SIGTERM");
    async move {
        tokio::select! {
            () = interrupt => Stop::Interrupt,
            () = terminate => Stop::Terminate,
        }
    }
}

/// Waits for Ctrl-C (the one signal other platforms have).
#[cfg(not(unix))]
pub fn shutdown_signal() -> impl std::future::Future<Output = Stop> {
    async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        Stop::Interrupt
    }
}
