//! The `loadout` command line: one binary, subcommands as an enum.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::{db, migrate, seed, telemetry::LogFormat};

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
pub enum Command {
    /// Apply, roll back or list schema migrations.
    Migrate {
        #[command(subcommand)]
        command: migrate::MigrateCommand,
    },
    /// Create the default agent and its tool links where absent; never overwrites edits.
    Seed,
    /// Render an agent's prompt from the database.
    Prompt {
        #[command(subcommand)]
        command: crate::prompt_cli::PromptCommand,
    },
    /// Render or lint a `$placeholder` template read from stdin (no database).
    Template {
        #[command(subcommand)]
        command: crate::template_cli::TemplateCommand,
        /// Largest template accepted, in bytes.
        #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", global = true, default_value_t = crate::template_cli::DEFAULT_MAX_TEMPLATE_BYTES)]
        max_template_bytes: usize,
    },
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Template {
            command,
            max_template_bytes,
        } => crate::template_cli::run(&command, max_template_bytes),
        Command::Migrate { command } => {
            let db = db::connect(&cli.database_url).await?;
            let states = migrate::run(&db, command).await?;
            if matches!(command, migrate::MigrateCommand::Status) {
                for state in states {
                    println!(
                        "{}\t{}",
                        if state.applied { "applied" } else { "pending" },
                        state.name
                    );
                }
            }
            db.close().await.ok();
            Ok(ExitCode::SUCCESS)
        }
        Command::Prompt { command } => {
            let db = db::connect(&cli.database_url).await?;
            let code = crate::prompt_cli::run(&db, command).await;
            db.close().await.ok();
            code
        }
        Command::Seed => {
            let db = db::connect(&cli.database_url).await?;
            let report = seed::run(&db, &crate::catalog::Seeds::embedded()?).await?;
            println!("{report}");
            db.close().await.ok();
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        super::Cli::command().debug_assert();
    }
}
