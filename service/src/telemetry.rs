//! Tracing set-up: logs go to stderr so stdout stays free for command output.

pub mod batch;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber once; `RUST_LOG` overrides the default `info` level.
/// Lines are formatted on the caller's thread and written to stderr in batches by a
/// thread of their own ([`batch`]), so a request never waits for the terminal or
/// the disk. Keep the returned guard until exit: dropping it writes what is left.
#[must_use = "dropping the guard stops the log writer"]
pub fn init(format: LogFormat) -> batch::Flush {
    let (writer, flush) = batch::start(std::io::stderr());
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm_migration=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        // Colour codes only for a person at a terminal, never into files or collectors.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    flush
}
