//! The `loadout` command line: one binary, subcommands as an enum.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod check;
pub mod config;
pub mod connectors;
pub mod import;
pub mod keys;
pub mod labels;
pub mod members;
pub mod migrate;
pub mod promote;
pub mod prompt;
pub mod proposals;
pub mod replay;
pub mod revisions;
pub mod rollout;
pub mod secrets;
pub mod seed;
pub mod serve;
pub mod template;
pub mod webhooks;

use crate::db;
use crate::telemetry::LogFormat;

/// loadout: serves each LLM agent its tools and its prompt from a database.
#[derive(Debug, Parser)]
#[command(name = "loadout", version, about)]
pub struct Cli {
    /// Database to use: `sqlite://FILE?mode=rwc` (embedded) or `postgres://USER@HOST/DB`.
    #[arg(long, env = "DATABASE_URL", global = true, default_value = db::DEFAULT_DATABASE_URL, hide_env_values = true)]
    pub database_url: String,

    /// Log line format (logs go to stderr).
    #[arg(
        long,
        env = "LOADOUT_LOG_FORMAT",
        global = true,
        value_enum,
        default_value_t
    )]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
// `Serve` holds the whole configuration; the command line is parsed once per process.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Apply, roll back or list schema migrations.
    Migrate {
        #[command(subcommand)]
        command: crate::db::migrate::MigrateCommand,
    },
    /// Create the default agent and its tool links where absent; never overwrites edits.
    Seed,
    /// Serve the HTTP API. Migrates and seeds first unless --no-migrate.
    Serve(crate::app::Settings),
    /// Check that the database agrees with the catalog and the code; exit 1 on errors.
    Check(check::CheckArgs),
    /// Create, list or revoke API keys (directly on the database).
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// List members, grant or revoke sign-off power, merge two members (on the database).
    Members {
        #[command(subcommand)]
        command: members::MembersCommand,
    },
    /// Sync an MCP connector's tools into the registry.
    Connectors {
        #[command(subcommand)]
        command: connectors::ConnectorsCommand,
    },
    /// Seal connectors' header values at rest, or rotate the key they are sealed with.
    Secrets {
        #[command(subcommand)]
        command: secrets::SecretsCommand,
    },
    /// An agent's revisions, one revision (--show N) or what changed between two (--diff A B).
    Revisions(revisions::RevisionsArgs),
    /// Check a tenant's recorded calls of each changed tool against a candidate revision.
    Replay(replay::ReplayArgs),
    /// Where an agent's labels point, or one label's moves (--history LABEL).
    Labels(labels::LabelsArgs),
    /// Point a label at a revision; a protected label of a gated agent waits for a sign-off.
    Promote(promote::PromoteArgs),
    /// Move a label back to the revision it held just before, at once.
    Rollback(promote::RollbackArgs),
    /// Set an agent's release mode; the only way to take a gated agent back to direct.
    ReleaseMode(promote::ReleaseModeArgs),
    /// Run a label's rollout: start, set, pause, resume, complete, abort, show.
    Rollout(rollout::RolloutArgs),
    /// Inspect the proposal ledger.
    Proposals {
        #[command(subcommand)]
        command: proposals::ProposalsCommand,
    },
    /// Render an agent's prompt from the database.
    Prompt {
        #[command(subcommand)]
        command: crate::cli::prompt::PromptCommand,
    },
    /// Webhook subscriptions: list, create, enable, disable, delete, rotate-secret, deliveries.
    Webhooks(webhooks::WebhooksArgs),
    /// Write the instance's configuration to a folder (agents, tools, channels, connectors).
    Export(config::ExportArgs),
    /// What applying a folder would change; exit 0 nothing, 2 something, 1 error.
    Plan(config::PlanArgs),
    /// Apply a folder in one guarded transaction (refused if the instance moved on).
    Apply(config::ApplyArgs),
    /// Import prompts from another tool (Langfuse): plan, then apply with --apply.
    Import {
        #[command(subcommand)]
        command: import::ImportCommand,
    },
    /// Render or lint a `$placeholder` template read from stdin (no database).
    Template {
        #[command(subcommand)]
        command: crate::cli::template::TemplateCommand,
        /// Largest template accepted, in bytes.
        #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", global = true, default_value_t = crate::app::settings::DEFAULT_MAX_TEMPLATE_BYTES)]
        max_template_bytes: usize,
    },
}

/// Runs a parsed command line.
/// The `loadout` binary: parse the command line, log, run, exit. It lives in the
/// library so that every generic it instantiates (the runtime driving `run`, clap's
/// parser) is compiled once, here, not again in the binary's crate: the binary's
/// own compile took 89 s of a 17-minute first release build.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let _logs = crate::telemetry::init(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            // One line, the whole cause chain; URLs in it were redacted where they were formatted.
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Template {
            command,
            max_template_bytes,
        } => crate::cli::template::run(&command, max_template_bytes),
        Command::Migrate { command } => {
            with_db(&cli.database_url, false, |db| {
                Box::pin(migrate::run(db, command))
            })
            .await
        }
        Command::Serve(settings) => serve::run(&cli.database_url, settings)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Check(args) => check::run(&cli.database_url, args).await,
        Command::Proposals { command } => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(proposals::run(db, command))
            })
            .await
        }
        Command::Connectors { command } => {
            let url = cli.database_url.clone();
            with_db(&cli.database_url, true, move |db| {
                Box::pin(async move { connectors::run(db, &url, command).await })
            })
            .await
        }
        Command::Secrets { command } => {
            let url = cli.database_url.clone();
            with_db(&cli.database_url, true, move |db| {
                Box::pin(async move { secrets::run(db, &url, command).await })
            })
            .await
        }
        Command::Keys { command } => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(keys::run(db, command))
            })
            .await
        }
        Command::Members { command } => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(members::run(db, command))
            })
            .await
        }
        Command::Prompt { command } => {
            let db = db::connect(&cli.database_url).await?;
            let code = crate::cli::prompt::run(&db, command).await;
            db.close().await.ok();
            code
        }
        Command::Revisions(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(revisions::output(db, &args).await?) })
            })
            .await
        }
        Command::Replay(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(replay::output(db, &args).await?) })
            })
            .await
        }
        Command::Labels(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(labels::output(db, &args).await?) })
            })
            .await
        }
        Command::Promote(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(promote::promote(db, args).await?) })
            })
            .await
        }
        Command::Rollback(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(promote::rollback(db, args).await?) })
            })
            .await
        }
        Command::Rollout(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(rollout::run(db, args).await?) })
            })
            .await
        }
        Command::ReleaseMode(args) => {
            with_db(&cli.database_url, true, |db| {
                Box::pin(async move { print(promote::release_mode(db, args).await?) })
            })
            .await
        }
        Command::Webhooks(args) => {
            let url = cli.database_url.clone();
            with_db(&cli.database_url, true, move |db| {
                Box::pin(async move { print(webhooks::output(db, &url, args).await?) })
            })
            .await
        }
        Command::Export(args) => config::export(&cli.database_url, args).await,
        Command::Plan(args) => config::plan(&cli.database_url, args).await,
        Command::Apply(args) => config::apply(&cli.database_url, args).await,
        Command::Import { command } => import::run(&cli.database_url, command).await,
        Command::Seed => with_db(&cli.database_url, false, |db| Box::pin(seed::run(db))).await,
    }
}

/// Prints a command's whole output.
fn print(text: String) -> anyhow::Result<()> {
    print!("{text}");
    Ok(())
}

/// Connects (checking the schema is current when `current`), runs `command`, closes.
async fn with_db(
    url: &str,
    current: bool,
    command: impl for<'a> FnOnce(
        &'a sea_orm::DatabaseConnection,
    )
        -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>>,
) -> anyhow::Result<ExitCode> {
    let db = db::connect(url).await?;
    let result = match current {
        true => match db::migrate::ensure_current(&db).await {
            Ok(()) => command(&db).await,
            Err(e) => Err(e),
        },
        false => command(&db).await,
    };
    db.close().await.ok();
    result.map(|()| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        super::Cli::command().debug_assert();
    }
}
