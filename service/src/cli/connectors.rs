//! `loadout connectors sync NAME`: the same sync as `POST /v1/connectors/{name}/sync`,
//! run from the command line against the database, printing the report as JSON.

use anyhow::Context;
use sea_orm::DatabaseConnection;

use crate::connectors::sync::{self, SyncRequest};
use crate::db::Writer;
use crate::vocab::{Clock, SystemClock};

#[derive(Debug, clap::Subcommand)]
pub enum ConnectorsCommand {
    /// Read an MCP connector's tools/list and bring its tools into the registry.
    Sync {
        /// The connector's name.
        name: String,
        /// Print what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Replace admins' edits of synced descriptions and tiers with the server's.
        #[arg(long)]
        overwrite: bool,
        /// Also link the synced tools to this agent (a link switched off stays off).
        #[arg(long)]
        agent: Option<String>,
        /// Map a remote name the verb mapping cannot place: REMOTE=LOADOUT_NAME (repeatable).
        #[arg(long = "rename", value_parser = parse_rename)]
        renames: Vec<(String, String)>,
        /// Take this remote tool as it is when strict mode cannot express its schema
        /// (exported with strict: false; `loadout check` warns). Repeatable.
        #[arg(long = "allow-loose")]
        allow_loose: Vec<String>,
        /// Where the server may be and how much of it to read (as `serve` takes them).
        #[command(flatten)]
        connectors: crate::app::settings::Connectors,
        /// The key the connector's header values are sealed with.
        #[command(flatten)]
        secrets: crate::cli::secrets::SecretsArgs,
    },
}

fn parse_rename(text: &str) -> Result<(String, String), String> {
    let (remote, name) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not REMOTE=LOADOUT_NAME"))?;
    Ok((remote.to_owned(), name.to_owned()))
}

pub async fn run(
    db: &DatabaseConnection,
    database_url: &str,
    command: ConnectorsCommand,
) -> anyhow::Result<()> {
    let ConnectorsCommand::Sync {
        name,
        dry_run,
        overwrite,
        agent,
        renames,
        allow_loose,
        connectors,
        secrets,
    } = command;
    let (keyring, _) = secrets.keyring(database_url, false)?;
    let outbound = connectors.outbound()?;
    let generation = crate::db::generation::current(db)
        .await
        .context("cannot read the configuration generation")?;
    let generation = std::sync::Arc::new(crate::cache::Generation::new(generation));
    let remote = sync::Remote {
        outbound: &outbound,
        secrets: &keyring,
        limits: connectors.list_limits(),
    };
    let request = SyncRequest {
        dry_run,
        overwrite,
        rename: renames.into_iter().collect(),
        allow_loose: allow_loose.into_iter().collect(),
        agent,
    };
    let writer = Writer {
        db,
        generation: &generation,
        now: SystemClock.now(),
        key: None,
    };
    let report = sync::run(&writer, &remote, &name, request)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
