//! Tracing set-up: logs go to stderr so stdout stays free for command output.

pub mod batch;
mod line;

use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

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
    // Colour codes only for a person at a terminal, never into files or collectors.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    install(format, std::io::stderr(), ansi)
}

/// Like [`init`], writing to `out` without colour (benchmarks log to a file).
#[must_use = "dropping the guard stops the log writer"]
pub fn init_to(format: LogFormat, out: impl std::io::Write + Send + 'static) -> batch::Flush {
    install(format, out, false)
}

fn install(
    format: LogFormat,
    out: impl std::io::Write + Send + 'static,
    ansi: bool,
) -> batch::Flush {
    let (writer, flush) = batch::start(out);
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer.clone());
    // Text lines come from our own layer ([`line`]), which writes no colour: the
    // cost of `fmt`'s was most of the cost of a request's line. A person at a
    // terminal gets `fmt`'s coloured lines.
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = match format {
        LogFormat::Text if ansi => fmt.with_ansi(true).boxed(),
        LogFormat::Text => line::Lines::new(writer).boxed(),
        LogFormat::Json => fmt.with_ansi(false).json().boxed(),
    };
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(filter())
        .try_init();
    flush
}

/// `RUST_LOG` as per-target levels (`info,sqlx=warn`), or the default. A `Targets`
/// filter decides from the callsite alone, with no lock per span enter and exit
/// (`EnvFilter` takes a shared lock there to support span-field directives, which
/// loadout does not need); an unreadable `RUST_LOG` falls back to the default.
fn filter() -> Targets {
    std::env::var("RUST_LOG")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| {
            Targets::new()
                .with_default(Level::INFO)
                .with_target("sqlx", Level::WARN)
                .with_target("sea_orm_migration", Level::WARN)
        })
}
