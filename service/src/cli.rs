//! The `loadout` command line: one binary, subcommands as an enum.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod prompt;
pub mod serve;
pub mod template;

use crate::db::{self, migrate};
use crate::registry::{Tier, seed};
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
pub enum Command {
    /// Apply, roll back or list schema migrations.
    Migrate {
        #[command(subcommand)]
        command: migrate::MigrateCommand,
    },
    /// Create the default agent and its tool links where absent; never overwrites edits.
    Seed,
    /// Serve the HTTP API. Migrates and seeds first unless --no-migrate.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "LOADOUT_BIND", default_value = "127.0.0.1:8080")]
        bind: std::net::SocketAddr,
        /// Also serve `/metrics`, without a key, on this address (e.g. 127.0.0.1:9090).
        #[arg(long, env = "LOADOUT_METRICS_BIND")]
        metrics_bind: Option<std::net::SocketAddr>,
        /// Private or loopback IPs connectors may reach (comma-separated), e.g. 127.0.0.1.
        #[arg(long, env = "LOADOUT_CONNECTOR_ALLOW", value_delimiter = ',')]
        connector_allow: Vec<std::net::IpAddr>,
        /// How long a tool execution may run before the proposal sweeper presumes it dead.
        #[arg(long, env = "LOADOUT_PROPOSAL_LEASE_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..))]
        proposal_lease_seconds: u32,
        /// How long a proposal of a tier waits for a decision, e.g. requires_approval=3600;
        /// repeatable; 86400 (24 h) for any tier not given.
        #[arg(long = "proposal-ttl", env = "LOADOUT_PROPOSAL_TTL", value_delimiter = ',', value_parser = parse_ttl)]
        proposal_ttls: Vec<(Tier, u32)>,
        /// Start even when `loadout check` finds errors (each is logged as a warning).
        #[arg(long)]
        allow_drift: bool,
        /// Do not migrate or seed on start; refuse to start on an unmigrated database instead.
        #[arg(long)]
        no_migrate: bool,
        /// Largest prompt template accepted, in bytes.
        #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", default_value_t = crate::cli::template::DEFAULT_MAX_TEMPLATE_BYTES)]
        max_template_bytes: usize,
    },
    /// Check that the database agrees with the catalog and the code; exit 1 on errors.
    Check {
        /// A catalog file of the `seeds/catalog.toml` format instead of the embedded one.
        #[arg(long)]
        catalog: Option<std::path::PathBuf>,
        /// Report format: lines for people, or the JSON report for machines.
        #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
        format: CheckFormat,
    },
    /// Create, list or revoke API keys (directly on the database).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Inspect the proposal ledger.
    Proposals {
        #[command(subcommand)]
        command: ProposalsCommand,
    },
    /// Render an agent's prompt from the database.
    Prompt {
        #[command(subcommand)]
        command: crate::cli::prompt::PromptCommand,
    },
    /// Render or lint a `$placeholder` template read from stdin (no database).
    Template {
        #[command(subcommand)]
        command: crate::cli::template::TemplateCommand,
        /// Largest template accepted, in bytes.
        #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", global = true, default_value_t = crate::cli::template::DEFAULT_MAX_TEMPLATE_BYTES)]
        max_template_bytes: usize,
    },
}

fn parse_ttl(text: &str) -> Result<(Tier, u32), String> {
    let (tier, seconds) = text
        .split_once('=')
        .ok_or_else(|| "expected TIER=SECONDS, e.g. requires_approval=3600".to_owned())?;
    let tier: Tier = tier.parse().map_err(|e: crate::closed::UnknownValue| e.to_string())?;
    let seconds: u32 = seconds
        .parse()
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("{seconds:?} is not a positive number of seconds"))?;
    Ok((tier, seconds))
}

/// `loadout check --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

/// Reads a catalog file, or the embedded one.
pub fn load_catalog(path: Option<&std::path::Path>) -> anyhow::Result<crate::registry::catalog::Catalog> {
    use anyhow::Context;
    match path {
        None => Ok(crate::registry::catalog::Seeds::embedded()?.catalog),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the catalog {}", path.display()))?;
            crate::registry::catalog::Catalog::parse(&text)
                .with_context(|| format!("the catalog {} is not valid", path.display()))
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum ProposalsCommand {
    /// List orphans: `executing` past their lease, `approved` but never claimed. Changes nothing.
    Orphans {
        /// How long an execution may hold its lease, in seconds.
        #[arg(long, default_value_t = 300)]
        lease_seconds: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; it is printed once, alone on the last line of stdout.
    Create {
        #[arg(long, value_enum)]
        role: crate::auth::keys::Role,
        /// A unique name: 1 to 64 of a-z, 0-9, '-', '_', '.'.
        #[arg(long)]
        name: String,
        /// The tenant whose runtime data (proposals) the key works on; `default` if omitted.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// One line per key: name, role, prefix, tenant, created, revoked (never the key).
    List,
    /// Revoke a key by name; requests with it get 401 from then on.
    Revoke { name: String },
}

async fn keys(db: &sea_orm::DatabaseConnection, command: KeysCommand) -> anyhow::Result<()> {
    use sea_orm::TransactionTrait;
    match command {
        KeysCommand::Create { role, name, tenant } => {
            let key = crate::auth::keys::create_for_tenant(db, &name, role, tenant.as_deref()).await?;
            println!("created {role} key {name:?}; it is shown once, store it now:");
            println!("{key}");
        }
        KeysCommand::List => {
            for k in crate::auth::keys::list(db).await? {
                let revoked = k
                    .revoked_at
                    .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339());
                println!(
                    "{}\t{}\tlo_{}\t{}\t{revoked}",
                    k.name,
                    k.role,
                    k.prefix,
                    k.created_at.to_rfc3339()
                );
            }
        }
        KeysCommand::Revoke { name } => {
            let txn = db.begin().await?;
            crate::auth::keys::revoke(&txn, &name).await?;
            crate::db::generation::bump(&txn).await?;
            txn.commit().await?;
            println!("revoked key {name:?}");
        }
    }
    Ok(())
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Template {
            command,
            max_template_bytes,
        } => crate::cli::template::run(&command, max_template_bytes),
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
        Command::Serve {
            bind,
            metrics_bind,
            connector_allow,
            proposal_lease_seconds,
            proposal_ttls,
            allow_drift,
            no_migrate,
            max_template_bytes,
        } => {
            let options = crate::cli::serve::Options {
                bind,
                metrics_bind,
                connector_allow,
                proposal_lease: chrono::TimeDelta::seconds(i64::from(proposal_lease_seconds)),
                proposal_ttls: proposal_ttls
                    .into_iter()
                    .map(|(tier, s)| (tier, chrono::TimeDelta::seconds(i64::from(s))))
                    .collect(),
                allow_drift,
                no_migrate,
                max_template_bytes,
            };
            crate::cli::serve::run(&cli.database_url, options).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { catalog, format } => {
            let catalog = load_catalog(catalog.as_deref())?;
            let db = db::connect(&cli.database_url).await?;
            migrate::ensure_current(&db).await?;
            let report = crate::registry::check::run(
                &db,
                &catalog,
                &crate::actions::executors::Executors::load(&db, Vec::new()).await?,
            )
            .await;
            db.close().await.ok();
            let report = report?;
            match format {
                CheckFormat::Text => print!("{}", report.text()),
                CheckFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
            }
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Proposals {
            command: ProposalsCommand::Orphans { lease_seconds },
        } => {
            let db = db::connect(&cli.database_url).await?;
            migrate::ensure_current(&db).await?;
            let lease = chrono::TimeDelta::try_seconds(lease_seconds)
                .filter(|l| *l > chrono::TimeDelta::zero())
                .ok_or_else(|| {
                    anyhow::anyhow!("--lease-seconds must be a positive number of seconds")
                })?;
            let found = crate::actions::ledger::orphans(&db, chrono::Utc::now(), lease).await;
            db.close().await.ok();
            for p in found? {
                println!(
                    "{}\t{}\t{}\t{}\tattempt {}\t{}",
                    p.id,
                    p.tenant_id,
                    p.state,
                    p.tool_name,
                    p.attempts,
                    p.updated_at.to_rfc3339()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Keys { command } => {
            let db = db::connect(&cli.database_url).await?;
            migrate::ensure_current(&db).await?;
            let result = keys(&db, command).await;
            db.close().await.ok();
            result.map(|()| ExitCode::SUCCESS)
        }
        Command::Prompt { command } => {
            let db = db::connect(&cli.database_url).await?;
            let code = crate::cli::prompt::run(&db, command).await;
            db.close().await.ok();
            code
        }
        Command::Seed => {
            let db = db::connect(&cli.database_url).await?;
            let report = seed::run(&db, &crate::registry::catalog::Seeds::embedded()?).await?;
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
